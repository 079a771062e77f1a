/**
 * The conversation with the daemon, free of any editor API: opening a session, running turns,
 * routing `turn/event` notifications, `permission/request` requests, the daemon's
 * `window/showMessage` messages and its MCP servers' changes (`mcpServer/changed`), cancelling.
 *
 * It talks through `Rpc`, which both vscode-languageclient's `LanguageClient` and
 * vscode-jsonrpc's `MessageConnection` satisfy, so the unit tests drive it in plain Node
 * against the real daemon.
 */

import {
  ErrorCodes,
  Methods,
  type ContextItem,
  type McpServerChangedParams,
  type PermissionRequestParams,
  type PermissionRequestResult,
  type RulesAddParams,
  type RulesAddResult,
  type RulesListResult,
  type RulesRevokeParams,
  type RulesRevokeResult,
  type SessionCloseResult,
  type SessionConfigureParams,
  type SessionConfigureResult,
  type SessionInfo,
  type SessionListResult,
  type SessionLoadResult,
  type SessionNewParams,
  type SessionNewResult,
  type TurnEventParams,
  type TurnStartParams,
  type TurnStartResult,
} from "./protocol.generated";

export type PermissionMode = NonNullable<SessionNewParams["permissionMode"]>;
export type IfBusy = NonNullable<TurnStartParams["ifBusy"]>;

/** The session the conversation talks to: opened with `session/new` or `session/load`. */
export type SessionOpened = SessionNewResult & Partial<Pick<SessionLoadResult, "turns" | "title">>;

/**
 * How a session came to be open: `new`; `loaded` on request (a window reload, the sessions
 * list); `resumed` after the daemon stopped, the same session continued.
 */
export type HowOpened = "new" | "loaded" | "resumed";

/** JSON-RPC errors of a connection that closed under a request (vscode-jsonrpc's codes). */
const CONNECTION_LOST = new Set([-32097, -32096]);

/** The daemon stopped while the request was open (it crashed, or was killed). */
export function isConnectionLost(error: unknown): boolean {
  const code = errorCode(error);
  return code !== undefined && CONNECTION_LOST.has(code);
}

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
  /** `replay`: an event of the history `session/load` replays before the session goes on. */
  onEvent(params: TurnEventParams, replay?: HowOpened): void;
  /**
   * A session was opened (the first ask, the first after a reset, a load, a resume). `note`
   * says why a session that was to be resumed could not be, and a new one was opened instead.
   */
  onSession?(session: SessionOpened, how: HowOpened, note?: string): void;
  /**
   * A message from the daemon, to show the user. One that the result of the session it came
   * with repeats about untrusted settings (`untrustedSettings`) is not passed on: the host
   * shows that result's richer notice instead. The other `warnings` of a session result
   * (problems in the settings files) come here too, as warnings (`type` 2), each once.
   */
  showMessage(params: ShowMessageParams): void;
  /**
   * One of the open session's MCP servers changed state (it stopped and is restarted, runs
   * again, failed for good): tell the user, with its last output. A change that came while the
   * session opened is passed on once its result has been.
   */
  onMcpServerChanged(params: McpServerChangedParams): void;
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

/** Thrown by `configure` and friends when there is no session to act on yet. */
export class NoSessionError extends Error {
  constructor() {
    super("No session is open yet: ask something first.");
  }
}

const REJECT_CANCELLED: PermissionRequestResult = { decision: "reject", message: "The turn was cancelled." };

export class Conversation implements Disposable {
  private session?: SessionOpened;
  private opening?: Promise<SessionOpened>;
  /** The session the next `ensureSession` continues (`session/load`) rather than opening one. */
  private resumeId?: string;
  /** The session being loaded, and why: its replayed events are routed as such. */
  private loading?: { sessionId: string; how: HowOpened };
  /** Messages that came while a session was opening: they wait for its result. */
  private held: ShowMessageParams[] = [];
  /** MCP servers' changes that came while a session was opening: they wait for its result. */
  private heldMcp: McpServerChangedParams[] = [];
  /** The next `ask` opens a new session (the settings it would read have changed). */
  private stale = false;
  /** The turns whose `turn/start` is open: one, or more with `ifBusy` (queued, steering). */
  private readonly turns = new Set<RunningTurn>();
  private readonly registrations: Disposable[];

  constructor(private readonly rpc: Rpc, private readonly host: ConversationHost) {
    this.registrations = [
      rpc.onNotification(Methods.TurnEvent, (params: TurnEventParams) => this.routeEvent(params)),
      rpc.onRequest(Methods.PermissionRequest, (params: PermissionRequestParams, token) =>
        this.routePermission(params, token)),
      rpc.onNotification(SHOW_MESSAGE, (params: ShowMessageParams) => this.routeMessage(params)),
      rpc.onNotification(Methods.McpServerChanged, (params: McpServerChangedParams) => this.routeMcpChange(params)),
    ];
  }

  get sessionInfo(): SessionOpened | undefined {
    return this.session;
  }

  get running(): boolean {
    return this.turns.size > 0;
  }

  /** The session the next request will continue, if it is not open yet (after the daemon stopped). */
  get pendingResume(): string | undefined {
    return this.resumeId;
  }

  /**
   * The open session; else the one to resume (`session/load`, then it goes on); else a new
   * one made with `settings`. A session that cannot be resumed is replaced by a new one, and
   * `onSession` says why: never silently.
   */
  async ensureSession(settings: SessionSettings): Promise<SessionOpened> {
    if (this.session) return this.session;
    if (!this.opening) {
      const resumeId = this.resumeId;
      this.opening = (async () => {
        let note: string | undefined;
        if (resumeId) {
          try {
            return await this.openWith(() => this.loadRequest(resumeId, "resumed"), "resumed");
          } catch (error) {
            if (isConnectionLost(error)) throw error;
            note = `Could not continue session ${resumeId.slice(0, 8)} (${messageOf(error)}); started a new session.`;
          } finally {
            if (this.resumeId === resumeId) this.resumeId = undefined;
          }
        }
        const params: SessionNewParams = { workspace: settings.workspace };
        if (settings.model) params.model = settings.model;
        if (settings.permissionMode) params.permissionMode = settings.permissionMode;
        return this.openWith(() => this.rpc.sendRequest<SessionNewResult>(Methods.SessionNew, params), "new", note);
      })().finally(() => {
        this.opening = undefined;
      });
    }
    return this.opening;
  }

  /**
   * Open an earlier session (a window reload, the sessions list): the daemon replays its
   * history as events (passed on with `replay` "loaded"), then the next `ask` continues it.
   */
  async load(sessionId: string): Promise<SessionOpened> {
    if (this.running) throw new TurnInProgressError();
    if (this.opening) await this.opening.catch(() => undefined);
    // Loading the open session again closes it first: the daemon handles requests in order, so
    // it loads it from its transcript.
    this.forgetSession();
    this.opening = this.openWith(() => this.loadRequest(sessionId, "loaded"), "loaded").finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  /** The sessions the daemon keeps for `workspace` (all when omitted), newest first. */
  async list(workspace?: string): Promise<SessionInfo[]> {
    const result = await this.rpc.sendRequest<SessionListResult>(Methods.SessionList, workspace ? { workspace } : {});
    return result.sessions;
  }

  /** Change the open session's permission mode and/or model for its next turns. */
  async configure(change: Omit<SessionConfigureParams, "sessionId">): Promise<SessionConfigureResult> {
    const session = this.session;
    if (!session) throw new NoSessionError();
    const result = await this.rpc.sendRequest<SessionConfigureResult>(Methods.SessionConfigure, { sessionId: session.sessionId, ...change });
    if (this.session?.sessionId === result.sessionId) {
      this.session = { ...this.session, model: result.model, permissionMode: result.permissionMode };
    }
    return result;
  }

  async listRules(): Promise<RulesListResult> {
    return this.rpc.sendRequest<RulesListResult>(Methods.RulesList, { sessionId: this.requireSession() });
  }

  async addRule(rule: Omit<RulesAddParams, "sessionId">): Promise<RulesAddResult> {
    return this.rpc.sendRequest<RulesAddResult>(Methods.RulesAdd, { sessionId: this.requireSession(), ...rule });
  }

  async revokeRule(rule: Omit<RulesRevokeParams, "sessionId">): Promise<RulesRevokeResult> {
    return this.rpc.sendRequest<RulesRevokeResult>(Methods.RulesRevoke, { sessionId: this.requireSession(), ...rule });
  }

  /**
   * The daemon stopped (crashed, was killed): its sessions are gone from memory but kept on
   * disk, so the next `ask` loads the open one and continues it.
   */
  daemonStopped(): void {
    if (this.session) this.resumeId = this.session.sessionId;
    this.session = undefined;
    this.stale = false;
  }

  private requireSession(): string {
    if (!this.session) throw new NoSessionError();
    return this.session.sessionId;
  }

  private loadRequest(sessionId: string, how: HowOpened): Promise<SessionLoadResult> {
    this.loading = { sessionId, how };
    return this.rpc.sendRequest<SessionLoadResult>(Methods.SessionLoad, { sessionId }).finally(() => {
      if (this.loading?.sessionId === sessionId) this.loading = undefined;
    });
  }

  private async openWith(request: () => Promise<SessionOpened>, how: HowOpened, note?: string): Promise<SessionOpened> {
    let result: SessionOpened;
    try {
      result = await request();
    } catch (error) {
      this.releaseMessages(undefined);
      this.releaseMcpChanges(undefined);
      throw error;
    }
    this.session = result;
    this.releaseMessages(result);
    this.host.onSession?.(result, how, note);
    this.releaseMcpChanges(result);
    return result;
  }

  /**
   * Run one prompt to its end in the session (opening it first if needed). Follow-ups reuse
   * the session. If the daemon lost the session (it restarted), a new one is opened once.
   */
  /**
   * Run one prompt to its end in the session (opening or resuming it first if needed).
   * Follow-ups reuse the session. If the daemon lost the session (it restarted), it is loaded
   * and continued, once. While a turn runs, `ifBusy` says what the daemon does with this
   * prompt: `queue` (the running turn takes it in at its next step; this resolves with that
   * turn's result) or `interrupt` (the running turn is cancelled, then this one runs); without
   * it a busy conversation throws `TurnInProgressError`.
   */
  async ask(settings: SessionSettings, prompt: string, context: ContextItem[] = [], ifBusy?: IfBusy): Promise<TurnStartResult> {
    const busy = this.turns.size > 0;
    if (busy && (!ifBusy || ifBusy === "reject" || !this.session)) throw new TurnInProgressError();
    const turn: RunningTurn = { sessionId: "", prompts: new Set(), cancelled: false };
    this.turns.add(turn);
    if (!busy && this.stale) this.forgetSession();
    try {
      for (let attempt = 0; ; attempt++) {
        const session = await this.ensureSession(settings);
        turn.sessionId = session.sessionId;
        if (turn.cancelled) return { turnId: "", reason: "cancelled", usage: {}, text: "", transitions: [] };
        const params: TurnStartParams = { sessionId: session.sessionId, prompt, context };
        if (busy && ifBusy) params.ifBusy = ifBusy;
        try {
          const result = await this.rpc.sendRequest<TurnStartResult>(Methods.TurnStart, params);
          turn.turnId = result.turnId;
          return result;
        } catch (error) {
          if (attempt === 0 && errorCode(error) === ErrorCodes.SessionNotFound) {
            // The daemon restarted under us: continue the same session in the new one.
            this.daemonStopped();
            continue;
          }
          if (isConnectionLost(error)) this.daemonStopped();
          throw error;
        }
      }
    } finally {
      for (const prompt of turn.prompts) prompt.abort();
      this.turns.delete(turn);
    }
  }

  /** End the running turns (queued prompts too); pending `ask`s resolve `cancelled`. Idempotent. */
  cancel(): boolean {
    if (!this.turns.size) return false;
    const sessions = new Set<string>();
    for (const turn of this.turns) {
      turn.cancelled = true;
      for (const prompt of turn.prompts) prompt.abort();
      if (turn.sessionId) sessions.add(turn.sessionId);
    }
    for (const sessionId of sessions) this.sendCancel({ sessionId });
    return true;
  }

  private sendCancel(params: { sessionId: string; turnId?: string }): void {
    void Promise.resolve(this.rpc.sendNotification(Methods.TurnCancel, params)).catch(() => undefined);
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

  /**
   * Start afresh: the next `ask` opens a new session (none is resumed). The session left is
   * closed in the daemon (its turn, if any, cancelled; its MCP servers stopped); its transcript
   * stays, so the sessions list can load it again.
   */
  forgetSession(): void {
    const left = this.session;
    this.session = undefined;
    this.resumeId = undefined;
    this.stale = false;
    if (left) this.close(left.sessionId);
  }

  /** `session/close`; an error (the daemon stopped, the session is not live) changes nothing. */
  private close(sessionId: string): void {
    void Promise.resolve(this.rpc.sendRequest<SessionCloseResult>(Methods.SessionClose, { sessionId })).catch(() => undefined);
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

  /**
   * The daemon reports a change from the session result on, so one may come just before that
   * result: it waits for it, as messages do. Changes of a session left behind are dropped.
   */
  private routeMcpChange(params: McpServerChangedParams): void {
    if (this.opening) this.heldMcp.push(params);
    else if (params.sessionId === this.session?.sessionId) this.host.onMcpServerChanged(params);
  }

  private releaseMcpChanges(result: SessionOpened | undefined): void {
    const held = this.heldMcp;
    this.heldMcp = [];
    for (const change of held) if (change.sessionId === result?.sessionId) this.host.onMcpServerChanged(change);
  }

  private routeEvent(params: TurnEventParams): void {
    if (this.loading && params.sessionId === this.loading.sessionId) {
      this.host.onEvent(params, this.loading.how);
      return;
    }
    if (!this.session || params.sessionId !== this.session.sessionId) return;
    if (params.event.kind === "turnStarted") {
      const mine = [...this.turns].filter((turn) => turn.sessionId === params.sessionId);
      // A queued prompt that outlived a cancelled turn starts as a turn of its own: end it too.
      if (mine.length && mine.every((turn) => turn.cancelled)) this.sendCancel({ sessionId: params.sessionId, turnId: params.turnId });
    }
    if (params.event.kind === "modeChanged") {
      // An approved plan: the session goes on in the mode the user picked.
      this.session = { ...this.session, permissionMode: params.event.mode };
    }
    this.host.onEvent(params);
  }

  private async routePermission(params: PermissionRequestParams, token: CancellationSignal): Promise<PermissionRequestResult> {
    const turn = [...this.turns].find((t) => t.sessionId === params.sessionId && !t.cancelled);
    if (!turn) return REJECT_CANCELLED;
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

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function errorCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}
