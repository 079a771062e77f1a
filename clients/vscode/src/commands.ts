/**
 * The commands: Ask agent, cancel, new session, restart the daemon, trust the workspace's
 * settings, open an earlier session. A turn streams into the panel while the status bar shows it
 * is running (and cancels it); the daemon's messages become notifications. A session outlives
 * the daemon and the window: after a crash or a reload the same session is loaded and goes on.
 */

import * as vscode from "vscode";
import { DaemonStartError, type Daemon } from "./daemon";
import * as editor from "./editor";
import type { ContextItem, McpServerChangedParams, TodoItem, TurnEventParams, TurnStartResult } from "./protocol.generated";
import { Conversation, isConnectionLost, TurnInProgressError, type HowOpened, type IfBusy, type SessionOpened, type ShowMessageParams } from "./session";
import { mcpNotice } from "./mcpServers";
import { instructionsNotice } from "./instructions";
import { mentionedPaths } from "./mentions";
import * as settings from "./settings";
import { describeContext, describeReason } from "./transcript";
import { Panel } from "./ui/panel";
import { askPermission } from "./ui/permissionPrompt";
import { manageRules, pickMode, pickModel, pickSession } from "./ui/pickers";
import { ReviewEditor } from "./ui/reviewEditor";
import { ContextMeter, StatusItem } from "./ui/statusBar";
import { WorkspaceTrust } from "./workspaceTrust";

const RUNNING_KEY = "heddle.turnRunning";
/** The workspace state key of the session the panel shows, to restore it after a reload. */
const SESSION_KEY = "heddle.sessionId";
/** What the panel says instead of vscode-jsonrpc's "Pending response rejected since connection got disposed". */
const DAEMON_STOPPED = "The Heddle daemon stopped during this turn. Your next request starts it again and continues this session.";

export class Commands implements vscode.Disposable {
  private readonly conversation: Conversation;
  private readonly trust: WorkspaceTrust;
  private readonly panel: Panel;
  private readonly status = new StatusItem();
  private readonly meter = new ContextMeter();
  private readonly diffs = new editor.DiffDocuments();
  private readonly proposals = new editor.ProposalFiles();
  private readonly reviews = new ReviewEditor(this.diffs, this.proposals);
  private activity?: string;
  /** A session to open once the daemon runs: restoring it found the daemon unable to start. */
  private restoreWhenRunning?: string;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly daemon: Daemon,
    extensionUri: vscode.Uri,
    private readonly log: vscode.LogOutputChannel,
    private readonly state: vscode.Memento,
  ) {
    this.conversation = new Conversation(daemon, {
      onEvent: (params, replay) => this.onEvent(params, replay),
      onSession: (session, how, note) => this.onSession(session, how, note),
      showMessage: (params) => showMessage(params),
      onMcpServerChanged: (params) => this.onMcpServerChanged(params),
      askPermission: async (request, signal) => {
        const answer = await askPermission(request, signal, this.diffs, this.reviews);
        if (answer.message) this.panel.dispatch({ type: "answered", toolCallId: request.toolCallId, message: answer.message });
        return answer;
      },
    });
    this.trust = new WorkspaceTrust(daemon, () => {
      this.conversation.renew();
      this.panel.dispatch({ type: "notice", level: "info", text: "Project settings trusted: the next request starts a new session, which applies them." });
    });
    this.panel = new Panel(extensionUri, {
      cancel: () => this.cancel(),
      newSession: () => this.newSession(),
      ask: (prompt, ifBusy) => void this.run(prompt, [], ifBusy),
      restore: () => void this.restore(),
      sessions: () => void this.sessions(),
      setMode: () => void this.setMode(),
      setModel: () => void this.setModel(),
      pickFile: () => editor.pickWorkspaceFile(),
    });
    this.disposables.push(
      vscode.commands.registerCommand("heddle.ask", () => this.ask()),
      vscode.commands.registerCommand("heddle.cancel", () => this.cancel()),
      vscode.commands.registerCommand("heddle.newSession", () => this.newSession()),
      vscode.commands.registerCommand("heddle.restartDaemon", () => this.restartDaemon()),
      vscode.commands.registerCommand("heddle.showPanel", () => this.panel.show(false)),
      vscode.commands.registerCommand("heddle.trustWorkspace", () => this.trust.command(editor.workspaceFolder())),
      vscode.commands.registerCommand("heddle.sessions", () => this.sessions()),
      vscode.commands.registerCommand("heddle.manageRules", () => this.rules()),
      vscode.commands.registerCommand("heddle.setMode", () => this.setMode()),
      vscode.commands.registerCommand("heddle.setModel", () => this.setModel()),
      daemon.onDidChangeState((state) => {
        // The daemon's sessions live on on disk: the next request continues the open one.
        if (state === "starting" || state === "stopped") this.daemonStopped();
        if (state === "stopped" && !this.conversation.running) this.status.stopped();
        if (state === "running" && !this.conversation.running) this.status.idle();
        if (state === "running" && this.restoreWhenRunning && !this.conversation.sessionInfo && !this.conversation.running) {
          void this.open(this.restoreWhenRunning);
        }
      }),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (settings.affectsDaemon(event)) void this.restartDaemon();
        else if (settings.affectsSession(event) && (this.conversation.sessionInfo || this.conversation.running)) {
          // A running turn (or one whose session is opening) goes on in its session, and its
          // events still reach the panel.
          this.conversation.renew();
          this.panel.dispatch({ type: "notice", level: "info", text: "Settings changed: the next request starts a new session." });
        }
      }),
    );
  }

  /** Brings the panel back after a window reload. */
  get serializer(): vscode.WebviewPanelSerializer {
    return this.panel.serializer;
  }

  /** The chat view in the side bar. */
  get viewProvider(): vscode.WebviewViewProvider {
    return this.panel.viewProvider;
  }

  /** Ask agent: an input box, then the turn, with the active file and selection as context. */
  async ask(): Promise<void> {
    const context = editor.activeContext();
    const busy = this.conversation.running;
    const prompt = await vscode.window.showInputBox({
      title: busy ? "Ask Heddle (it is still working: you choose next whether to queue or steer)" : "Ask Heddle",
      prompt: context.length ? `Context: ${context.map(describeContext).join(", ")}` : "No file is open; Heddle sees the workspace.",
      placeHolder: "What should Heddle do?",
      ignoreFocusOut: true,
    });
    if (!prompt?.trim()) return;
    let ifBusy: IfBusy | undefined;
    if (this.conversation.running) {
      const choice = await vscode.window.showQuickPick(
        [
          { label: "Queue", description: "send it when the agent reaches its next step", ifBusy: "queue" as const },
          { label: "Steer", description: "stop what it is doing and answer this instead", ifBusy: "interrupt" as const },
        ],
        { title: "Heddle is working on the last request", placeHolder: prompt.trim(), ignoreFocusOut: true },
      );
      if (!choice) return;
      ifBusy = choice.ifBusy;
    }
    await this.run(prompt.trim(), context, ifBusy);
  }

  cancel(): void {
    if (this.conversation.cancel()) this.showActivity("cancelling");
  }

  newSession(): void {
    this.conversation.reset();
    this.forgetSession();
    this.panel.dispatch({ type: "clear" });
    this.panel.dispatch({ type: "notice", level: "info", text: "New session." });
  }

  async restartDaemon(): Promise<void> {
    this.conversation.reset();
    try {
      await this.daemon.restart();
      this.panel.dispatch({ type: "notice", level: "info", text: "The daemon was restarted; the next request starts a new session." });
    } catch (error) {
      this.showStartError(error);
    }
  }

  dispose(): void {
    this.conversation.dispose();
    this.disposables.forEach((d) => d.dispose());
    this.panel.dispose();
    this.status.dispose();
    this.meter.dispose();
    this.reviews.dispose();
    this.proposals.dispose();
    this.diffs.dispose();
  }

  /**
   * Open the session the panel showed before the window reloaded: the daemon replays its
   * history into the panel, and the next request continues it.
   */
  async restore(): Promise<void> {
    const sessionId = this.state.get<string>(SESSION_KEY);
    if (!sessionId || this.conversation.sessionInfo || this.conversation.running) return;
    await this.open(sessionId);
  }

  /** The sessions list: the chosen session opens in the panel, and the next request continues it. */
  async sessions(): Promise<void> {
    try {
      const sessionId = await pickSession(this.conversation, editor.workspaceFolder());
      if (sessionId) await this.open(sessionId);
    } catch (error) {
      void vscode.window.showErrorMessage(`Heddle: ${plainMessage(error)}`);
    }
  }

  async rules(): Promise<void> {
    if (!(await this.sessionForCommand())) return;
    await manageRules(this.conversation);
  }

  /** The permission mode of the session's next turns (session/configure). */
  async setMode(): Promise<void> {
    const session = await this.sessionForCommand();
    if (!session) return;
    const mode = await pickMode(session.permissionMode);
    if (mode) await this.configure({ permissionMode: mode });
  }

  async setModel(): Promise<void> {
    const session = await this.sessionForCommand();
    if (!session) return;
    const model = await pickModel(session.model);
    if (model) await this.configure({ model });
  }

  private async configure(change: { permissionMode?: SessionOpened["permissionMode"]; model?: string }): Promise<void> {
    if (this.conversation.running) {
      void vscode.window.showWarningMessage("Heddle is working: change the mode or model when the turn has ended.");
      return;
    }
    try {
      const result = await this.conversation.configure(change);
      this.panel.setSession(this.conversation.sessionInfo);
      this.panel.dispatch({ type: "notice", level: "info", text: `From the next request: ${result.model} · ${result.permissionMode} (same session).` });
    } catch (error) {
      void vscode.window.showErrorMessage(`Heddle: ${plainMessage(error)}`);
    }
  }

  /** The open session, opening (or resuming) one for the folder when there is none yet. */
  private async sessionForCommand(): Promise<SessionOpened | undefined> {
    const workspace = editor.workspaceFolder();
    if (!workspace) {
      void vscode.window.showErrorMessage("Heddle needs a folder: open one first.");
      return undefined;
    }
    try {
      return await this.conversation.ensureSession({ workspace, model: settings.model(), permissionMode: settings.permissionMode() });
    } catch (error) {
      void vscode.window.showErrorMessage(`Heddle: ${plainMessage(error)}`);
      return undefined;
    }
  }

  /** Show an earlier session in the panel (its history replayed) and continue it from there. */
  async open(sessionId: string): Promise<boolean> {
    if (this.conversation.running) {
      void vscode.window.showWarningMessage("Heddle is working: cancel the turn first, then open the session.");
      return false;
    }
    this.panel.show(false);
    this.panel.dispatch({ type: "clear" });
    this.meter.reset();
    try {
      await this.conversation.load(sessionId);
      this.restoreWhenRunning = undefined;
      return true;
    } catch (error) {
      if (error instanceof DaemonStartError) {
        // The session is fine; the daemon is not. Opened once the daemon runs (a restart).
        this.restoreWhenRunning = sessionId;
        this.panel.dispatch({ type: "notice", level: "warning", text: `Session ${sessionId.slice(0, 8)} opens once the daemon runs: ${plainMessage(error)}` });
        this.showStartError(error);
        return false;
      }
      this.panel.dispatch({ type: "failure", message: `Could not open session ${sessionId.slice(0, 8)}: ${plainMessage(error)}` });
      void this.state.update(SESSION_KEY, undefined);
      return false;
    }
  }

  /** The next request opens a new session (a new session was asked). */
  private forgetSession(): void {
    this.conversation.forgetSession();
    this.panel.setSession(undefined);
    this.meter.reset();
    void this.state.update(SESSION_KEY, undefined);
  }

  /** The daemon stopped or restarts: the session it had is continued by the next request. */
  private daemonStopped(): void {
    const had = this.conversation.sessionInfo;
    this.conversation.daemonStopped();
    if (had) {
      this.panel.setSession(undefined, had.sessionId);
      this.panel.dispatch({ type: "notice", level: "warning", text: "The Heddle daemon stopped. Your next request starts it again and continues this session." });
    }
  }

  /**
   * An MCP server stopped and is restarted, runs again, or failed for good: said in the chat,
   * with its last output, and in the log; a notification too, unless it runs again.
   */
  private onMcpServerChanged(params: McpServerChangedParams): void {
    const notice = mcpNotice(params);
    this.panel.dispatch({ type: "notice", ...notice });
    const logged = [params.message, ...(params.stderr ?? []).map((line) => `  ${line}`)].join("\n");
    if (notice.level === "info") this.log.info(logged);
    else this.log.warn(logged);
    const last = params.stderr?.at(-1);
    const popup = last ? `${params.message} Its last output: ${last}` : params.message;
    if (notice.level === "error") void vscode.window.showErrorMessage(popup);
    else if (notice.level === "warning") void vscode.window.showWarningMessage(popup);
  }

  private onSession(session: SessionOpened, how: HowOpened, note?: string): void {
    this.panel.setSession(session);
    void this.state.update(SESSION_KEY, session.sessionId);
    void this.trust.sessionOpened(session);
    if (note) this.panel.dispatch({ type: "notice", level: "warning", text: note });
    const instructions = instructionsNotice(session.instructions, session.workspace);
    if (instructions && how !== "resumed") this.panel.dispatch({ type: "notice", level: "info", text: instructions });
    if (how === "resumed") {
      this.panel.dispatch({ type: "notice", level: "info", text: `Continuing the same session in a new daemon (${turnsOf(session)} so far, its history kept).` });
    }
    if (how === "loaded") {
      this.panel.dispatch({ type: "notice", level: "info", text: `Session “${session.title ?? session.sessionId.slice(0, 8)}” (${turnsOf(session)}): your next request continues it.` });
    }
  }

  private async run(prompt: string, context: ContextItem[], ifBusy?: IfBusy): Promise<void> {
    const workspace = editor.workspaceFolder();
    if (!workspace) {
      void vscode.window.showErrorMessage("Heddle needs a folder: open one, then ask again.");
      return;
    }
    const busy = this.conversation.running;
    if (busy && !ifBusy) return;
    // Files the prompt @-mentions go along as context (after the active file's).
    const mentioned = await editor.mentionContext(workspace, mentionedPaths(prompt));
    context = [...context, ...mentioned.filter((item) => !context.some((c) => c.path === item.path && !c.range))];
    this.panel.show();
    this.panel.dispatch({ type: "prompt", prompt, context, ...(busy && ifBusy ? { ifBusy } : {}) });
    const options = { workspace, model: settings.model(), permissionMode: settings.permissionMode() };
    const turn = this.conversation.ask(options, prompt, context, ifBusy);
    if (!busy) this.setRunning(true);
    try {
      const result = await turn;
      this.finish(result);
    } catch (error) {
      if (error instanceof TurnInProgressError) return;
      const message = plainMessage(error);
      this.log.error(`turn failed: ${messageOf(error)}`);
      this.panel.dispatch({ type: "failure", message });
      if (error instanceof DaemonStartError) this.showStartError(error);
      else if (!isConnectionLost(error)) void vscode.window.showErrorMessage(`Heddle: ${message}`);
    } finally {
      // A steered turn ends while the one that replaced it goes on.
      if (!this.conversation.running) this.setRunning(false);
    }
  }

  private finish(result: TurnStartResult): void {
    this.panel.dispatch({ type: "result", result });
    if (result.reason !== "completed" && result.reason !== "cancelled") {
      void vscode.window.showWarningMessage(`Heddle: ${describeReason(result.reason)}${result.error ? ` — ${result.error.message}` : ""}`);
    }
  }

  private onEvent(params: TurnEventParams, replay?: HowOpened): void {
    // A resumed session's history is what the panel shows already.
    if (replay === "resumed") return;
    if (replay) {
      this.panel.dispatch({ type: "event", params, replay: true });
      if (params.event.kind === "usage") this.meter.update(params.event.contextTokens, params.event.contextWindow);
      return;
    }
    this.panel.dispatch({ type: "event", params });
    const event = params.event;
    if (event.kind === "usage") this.meter.update(event.contextTokens, event.contextWindow);
    if (event.kind === "compaction") this.meter.compaction(event.tokensBefore, event.tokensAfter);
    const activity =
      event.kind === "toolCallInput" ? event.title
      : event.kind === "permissionAsked" ? `waiting for you: ${event.title}`
      : event.kind === "loopDetected" ? "waiting for you: the agent is repeating itself"
      : event.kind === "textDelta" ? "writing"
      : event.kind === "retry" ? `retrying (${event.attempt}/${event.maxAttempts})`
      : event.kind === "todo" ? currentTask(event.todos)
      : undefined;
    if (activity) this.showActivity(activity);
  }

  /**
   * The status bar says what the turn is doing; cancelling has the last word. (No progress
   * notification: it covered the panel's input.)
   */
  private showActivity(activity: string): void {
    if (!this.conversation.running || activity === this.activity || this.activity === "cancelling") return;
    this.activity = activity;
    this.status.running(activity);
  }

  private setRunning(running: boolean): void {
    this.activity = undefined;
    editor.setContextKey(RUNNING_KEY, running);
    this.panel.setRunning(running);
    if (running) this.showActivity("starting");
    else if (this.daemon.isRunning) this.status.idle();
    else this.status.stopped();
  }

  private showStartError(error: unknown): void {
    this.status.stopped();
    void vscode.window.showErrorMessage(messageOf(error), "Open Settings", "Show Log").then((choice) => {
      if (choice === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", "heddle.server");
      if (choice === "Show Log") this.log.show();
    });
  }
}

/** A daemon message as vscode-languageclient would show it, had Heddle not taken it over. */
function showMessage(params: ShowMessageParams): void {
  if (params.type === 1) void vscode.window.showErrorMessage(params.message);
  else if (params.type === 2) void vscode.window.showWarningMessage(params.message);
  else void vscode.window.showInformationMessage(params.message);
}

/** The plan's task in progress, as it reads while it runs. */
function currentTask(todos: TodoItem[]): string | undefined {
  const task = todos.find((todo) => todo.status === "inProgress");
  return task ? task.activeForm || task.content : undefined;
}

/** An error as the user should read it: a closed connection is the daemon having stopped. */
function plainMessage(error: unknown): string {
  return isConnectionLost(error) ? DAEMON_STOPPED : messageOf(error);
}

function turnsOf(session: SessionOpened): string {
  const turns = session.turns ?? 0;
  return `${turns} turn${turns === 1 ? "" : "s"}`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
