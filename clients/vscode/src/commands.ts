/**
 * The commands: Ask agent, cancel, new session, restart the daemon, trust the workspace's
 * settings. A turn streams into the panel while the status bar and a cancellable progress
 * notification show it is running; the daemon's messages become notifications.
 */

import * as vscode from "vscode";
import { DaemonStartError, type Daemon } from "./daemon";
import * as editor from "./editor";
import type { ContextItem, TodoItem, TurnEventParams, TurnStartResult } from "./protocol.generated";
import { Conversation, TurnInProgressError, type ShowMessageParams } from "./session";
import * as settings from "./settings";
import { describeContext, describeReason } from "./transcript";
import { Panel } from "./ui/panel";
import { askPermission } from "./ui/permissionPrompt";
import { ReviewEditor } from "./ui/reviewEditor";
import { StatusItem } from "./ui/statusBar";
import { WorkspaceTrust } from "./workspaceTrust";

const RUNNING_KEY = "heddle.turnRunning";

export class Commands implements vscode.Disposable {
  private readonly conversation: Conversation;
  private readonly trust: WorkspaceTrust;
  private readonly panel: Panel;
  private readonly status = new StatusItem();
  private readonly diffs = new editor.DiffDocuments();
  private readonly proposals = new editor.ProposalFiles();
  private readonly reviews = new ReviewEditor(this.diffs, this.proposals);
  private progress?: vscode.Progress<{ message?: string }>;
  private activity?: string;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly daemon: Daemon, extensionUri: vscode.Uri, private readonly log: vscode.LogOutputChannel) {
    this.conversation = new Conversation(daemon, {
      onEvent: (params) => this.onEvent(params),
      onSession: (session) => {
        this.panel.setSession(session);
        void this.trust.sessionOpened(session);
      },
      showMessage: (params) => showMessage(params),
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
      ask: (prompt) => void this.run(prompt, []),
    });
    this.disposables.push(
      vscode.commands.registerCommand("heddle.ask", () => this.ask()),
      vscode.commands.registerCommand("heddle.cancel", () => this.cancel()),
      vscode.commands.registerCommand("heddle.newSession", () => this.newSession()),
      vscode.commands.registerCommand("heddle.restartDaemon", () => this.restartDaemon()),
      vscode.commands.registerCommand("heddle.showPanel", () => this.panel.show(false)),
      vscode.commands.registerCommand("heddle.trustWorkspace", () => this.trust.command(editor.workspaceFolder())),
      daemon.onDidChangeState((state) => {
        if (state === "starting") this.forgetSession();
        if (state === "stopped" && !this.conversation.running) this.status.stopped();
        if (state === "running" && !this.conversation.running) this.status.idle();
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

  /** Ask agent: an input box, then the turn, with the active file and selection as context. */
  async ask(): Promise<void> {
    if (this.conversation.running) {
      const choice = await vscode.window.showWarningMessage("Heddle is still working on the last request.", "Cancel it", "Show panel");
      if (choice === "Cancel it") this.cancel();
      if (choice === "Show panel") this.panel.show(false);
      return;
    }
    const context = editor.activeContext();
    const prompt = await vscode.window.showInputBox({
      title: "Ask Heddle",
      prompt: context.length ? `Context: ${context.map(describeContext).join(", ")}` : "No file is open; Heddle sees the workspace.",
      placeHolder: "What should Heddle do?",
      ignoreFocusOut: true,
    });
    if (!prompt?.trim()) return;
    await this.run(prompt.trim(), context);
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
    this.reviews.dispose();
    this.proposals.dispose();
    this.diffs.dispose();
  }

  /** The next request opens a new session (the daemon restarted, or a new session was asked). */
  private forgetSession(): void {
    this.conversation.forgetSession();
    this.panel.setSession(undefined);
  }

  private async run(prompt: string, context: ContextItem[]): Promise<void> {
    const workspace = editor.workspaceFolder();
    if (!workspace) {
      void vscode.window.showErrorMessage("Heddle needs a folder: open one, then ask again.");
      return;
    }
    if (this.conversation.running) return;
    this.panel.show();
    this.panel.dispatch({ type: "prompt", prompt, context });
    const options = { workspace, model: settings.model(), permissionMode: settings.permissionMode() };
    const turn = this.conversation.ask(options, prompt, context);
    this.setRunning(true);
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "Heddle", cancellable: true },
      (progress, token) => {
        this.progress = progress;
        progress.report({ message: this.activity });
        token.onCancellationRequested(() => this.cancel());
        return turn.catch(() => undefined);
      },
    );
    try {
      const result = await turn;
      this.finish(result);
    } catch (error) {
      if (error instanceof TurnInProgressError) return;
      const message = messageOf(error);
      this.log.error(`turn failed: ${message}`);
      this.panel.dispatch({ type: "failure", message });
      if (error instanceof DaemonStartError) this.showStartError(error);
      else void vscode.window.showErrorMessage(`Heddle: ${message}`);
    } finally {
      this.progress = undefined;
      this.setRunning(false);
    }
  }

  private finish(result: TurnStartResult): void {
    this.panel.dispatch({ type: "result", result });
    if (result.reason !== "completed" && result.reason !== "cancelled") {
      void vscode.window.showWarningMessage(`Heddle: ${describeReason(result.reason)}${result.error ? ` — ${result.error.message}` : ""}`);
    }
  }

  private onEvent(params: TurnEventParams): void {
    this.panel.dispatch({ type: "event", params });
    const event = params.event;
    const activity =
      event.kind === "toolCallInput" ? event.title
      : event.kind === "permissionAsked" ? `waiting for you: ${event.title}`
      : event.kind === "textDelta" ? "writing"
      : event.kind === "retry" ? `retrying (${event.attempt}/${event.maxAttempts})`
      : event.kind === "todo" ? currentTask(event.todos)
      : undefined;
    if (activity) this.showActivity(activity);
  }

  /** Status bar and notification say what the turn is doing; cancelling has the last word. */
  private showActivity(activity: string): void {
    if (!this.conversation.running || activity === this.activity || this.activity === "cancelling") return;
    this.activity = activity;
    this.status.running(activity);
    this.progress?.report({ message: activity });
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

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
