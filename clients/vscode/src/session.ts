/**
 * The conversation with the daemon, free of any editor API: opening a session, running turns,
 * routing `turn/event` notifications, `permission/request` requests and the daemon's
 * `window/showMessage` messages, cancelling.
 *
 * It talks through `Rpc`, which both vscode-languageclient's `LanguageClient` and
 * vscode-jsonrpc's `MessageConnection` satisfy, so the unit tests drive it in plain Node
 * against the real daemon.
 */

import {
  ErrorCodes,
  Methods,
  type ContextItem,
  type PermissionRequestParams,
  type PermissionRequestResult,
  type SessionNewParams,
  type SessionNewResult,
  type TurnEventParams,
  type TurnStartParams,
  type TurnStartResult,
} from "./protocol.generated";

export type PermissionMode = NonNullable<SessionNewParams["permissionMode"]>;

/** LSP's `window/showMessage`, which the daemon sends (it is not in Heddle's method table). */
export const SHOW_MESSAGE = "window/showMessage";

/** `window/showMessage` params: `type` 1 error, 2 warning, 3 info, 4 log. */
export interface ShowMessageParams {
  type: number;
  message: string;
}

export interface Disposable {
  dispose(): void;
}

export interface CancellationSignal {
  readonly isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): Disposable;
}

/** The slice of a JSON-RPC connection the conversation needs. */
export interface Rpc {
  sendRequest<R>(method: string, params: unknown): Promise<R>;
  sendNotification(method: string, params: unknown): Promise<void> | void;
  onNotification(method: string, handler: (params: any) => void): Disposable;
  onRequest(method: string, handler: (params: any, token: CancellationSignal) => unknown): Disposable;
}

/** What the editor provides: where events go and who answers permission requests. */
export interface ConversationHost {
  onEvent(params: TurnEventParams): void;
  /** A session was opened (the first ask, or the first after a reset). */
  onSession?(session: SessionNewResult): void;
  /**
   * A message from the daemon, to show the user. One that the result of the session it came
   * with repeats about untrusted settings (`untrustedSettings`) is not passed on: the host
   * shows that result's richer notice instead. The other `warnings` of a session result
   * (problems in the settings files) come here too, as warnings (`type` 2), each once.
   */
  showMessage(params: ShowMessageParams): void;
  /** Ask the user. `signal` is aborted when the turn is cancelled or the daemon withdraws. */
  askPermission(request: PermissionRequestParams, signal: AbortSignal): Promise<PermissionRequestResult>;
}

export interface SessionSettings {
  workspace: string;
  model?: string;
  permissionMode?: PermissionMode;
}

/** Thrown by `ask` while another turn runs: one turn at a time per session. */
export class TurnInProgressError extends Error {
  constructor() {
    super("A turn is already running; cancel it or wait for it to finish.");
  }
}

interface RunningTurn {
  sessionId: string;
  turnId?: string;
  prompts: Set<AbortController>;
  cancelled: boolean;
}

const REJECT_CANCELLED: PermissionRequestResult = { decision: "reject", message: "The turn was cancelled." };

export class Conversation implements Disposable {
  private session?: SessionNewResult;
  private opening?: Promise<SessionNewResult>;
  /** Messages that came while a session was opening: they wait for its result. */
  private held: ShowMessageParams[] = [];
  /** The next `ask` opens a new session (the settings it would read have changed). */
  private stale = false;
  private turn?: RunningTurn;
  private readonly registrations: Disposable[];

  constructor(private readonly rpc: Rpc, private readonly host: ConversationHost) {
    this.registrations = [
      rpc.onNotification(Methods.TurnEvent, (params: TurnEventParams) => this.routeEvent(params)),
      rpc.onRequest(Methods.PermissionRequest, (params: PermissionRequestParams, token) =>
        this.routePermission(params, token)),
      rpc.onNotification(SHOW_MESSAGE, (params: ShowMessageParams) => this.routeMessage(params)),
    ];
  }

  get sessionInfo(): SessionNewResult | undefined {
    return this.session;
  }

  get running(): boolean {
    return this.turn !== undefined;
  }

  /** The open session, or a new one made with `settings`. */
  async ensureSession(settings: SessionSettings): Promise<SessionNewResult> {
    if (this.session) return this.session;
    if (!this.opening) {
      const params: SessionNewParams = { workspace: settings.workspace };
      if (settings.model) params.model = settings.model;
      if (settings.permissionMode) params.permissionMode = settings.permissionMode;
      this.opening = this.rpc.sendRequest<SessionNewResult>(Methods.SessionNew, params).then(
        (result) => {
          this.session = result;
          this.releaseMessages(result);
          this.host.onSession?.(result);
          return result;
        },
        (error: unknown) => {
          this.releaseMessages(undefined);
          throw error;
        },
      ).finally(() => {
        this.opening = undefined;
      });
    }
    return this.opening;
  }

  /**
   * Run one prompt to its end in the session (opening it first if needed). Follow-ups reuse
   * the session. If the daemon lost the session (it restarted), a new one is opened once.
   */
  async ask(settings: SessionSettings, prompt: string, context: ContextItem[] = []): Promise<TurnStartResult> {
    if (this.turn) throw new TurnInProgressError();
    const turn: RunningTurn = { sessionId: "", prompts: new Set(), cancelled: false };
    this.turn = turn;
    if (this.stale) this.forgetSession();
    try {
      for (let attempt = 0; ; attempt++) {
        const session = await this.ensureSession(settings);
        turn.sessionId = session.sessionId;
        if (turn.cancelled) return { turnId: "", reason: "cancelled", usage: {}, text: "", transitions: [] };
        const params: TurnStartParams = { sessionId: session.sessionId, prompt, context };
        try {
          const result = await this.rpc.sendRequest<TurnStartResult>(Methods.TurnStart, params);
          turn.turnId = result.turnId;
          return result;
        } catch (error) {
          if (attempt === 0 && errorCode(error) === ErrorCodes.SessionNotFound) {
            this.forgetSession();
            continue;
          }
          throw error;
        }
      }
    } finally {
      for (const prompt of turn.prompts) prompt.abort();
      this.turn = undefined;
    }
  }

  /** End the running turn; the pending `ask` resolves with reason `cancelled`. Idempotent. */
  cancel(): boolean {
    const turn = this.turn;
    if (!turn) return false;
    turn.cancelled = true;
    for (const prompt of turn.prompts) prompt.abort();
    if (turn.sessionId) {
      const params = turn.turnId ? { sessionId: turn.sessionId, turnId: turn.turnId } : { sessionId: turn.sessionId };
      void Promise.resolve(this.rpc.sendNotification(Methods.TurnCancel, params)).catch(() => undefined);
    }
    return true;
  }

  /**
   * The next `ask` opens a new session, because what a session reads when it opens has
   * changed (its settings were trusted). Unlike `reset`, a running turn goes on to its end in
   * the current session.
   */
  renew(): void {
    if (this.session || this.opening) this.stale = true;
  }

  /** Start over: the next `ask` opens a new session. A running turn is cancelled. */
  reset(): void {
    this.cancel();
    this.forgetSession();
  }

  dispose(): void {
    this.cancel();
    for (const registration of this.registrations) registration.dispose();
  }

  /** The daemon lost its sessions (it restarted): the next `ask` opens a new one. */
  forgetSession(): void {
    this.session = undefined;
    this.stale = false;
  }

  /**
   * The daemon warns about untrusted project settings with `window/showMessage` just before the
   * `session/new` result that says the same in `warnings`, with what to trust in
   * `untrustedSettings`. So messages that come while a session opens wait for its result
   * (they arrive in order on one stream), and those it repeats are not shown twice.
   */
  private routeMessage(params: ShowMessageParams): void {
    if (this.opening) this.held.push(params);
    else this.host.showMessage(params);
  }

  /**
   * Show what came while a session opened, and the warnings of its result: each distinct one
   * once. A held message the result repeats about untrusted settings is left to the trust
   * notice; the result's other warnings (the settings files' problems, which the daemon only
   * returns) are shown as warnings.
   */
  private releaseMessages(result: SessionNewResult | undefined): void {
    const held = this.held;
    this.held = [];
    const warnings = result?.warnings ?? [];
    const repeated = result?.untrustedSettings ? warnings : [];
    const shown = new Set<string>();
    for (const message of held) {
      if (!repeated.includes(message.message) && !shown.has(message.message)) this.host.showMessage(message);
      shown.add(message.message);
    }
    for (const warning of warnings) {
      if (!shown.has(warning)) this.host.showMessage({ type: 2, message: warning });
      shown.add(warning);
    }
  }

  private routeEvent(params: TurnEventParams): void {
    if (!this.session || params.sessionId !== this.session.sessionId) return;
    if (this.turn && this.turn.sessionId === params.sessionId && !this.turn.turnId) {
      this.turn.turnId = params.turnId;
      // A cancel that came before the turn had an id went out without one; that is fine.
    }
    this.host.onEvent(params);
  }

  private async routePermission(params: PermissionRequestParams, token: CancellationSignal): Promise<PermissionRequestResult> {
    const turn = this.turn;
    if (!turn || turn.sessionId !== params.sessionId || turn.cancelled) return REJECT_CANCELLED;
    const controller = new AbortController();
    turn.prompts.add(controller);
    const withdrawn = token.onCancellationRequested(() => controller.abort());
    try {
      if (token.isCancellationRequested) controller.abort();
      if (controller.signal.aborted) return REJECT_CANCELLED;
      const answer = await this.host.askPermission(params, controller.signal);
      return controller.signal.aborted ? REJECT_CANCELLED : answer;
    } finally {
      withdrawn.dispose();
      turn.prompts.delete(controller);
    }
  }
}

function errorCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}
