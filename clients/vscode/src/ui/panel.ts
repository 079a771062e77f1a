/**
 * The Heddle panel: a webview that shows the conversation as it streams. The extension keeps
 * the transcript and sends each action to the webview, which runs the same reducer; a panel
 * that is reopened or reloaded gets the whole transcript again. After a window reload VS Code
 * brings the panel back through its serializer, and the panel asks for its session again.
 */

import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import type { SessionNewResult } from "../protocol.generated";
import type { IfBusy } from "../session";
import { EMPTY, reduce, type Action, type Transcript } from "../transcript";

/** Messages from the webview script (src/webview/main.ts). */
export type FromWebview =
  | { type: "ready" }
  | { type: "cancel" }
  | { type: "newSession" }
  | { type: "sessions" }
  | { type: "setMode" }
  | { type: "setModel" }
  /** `@` was typed: pick a file to mention. */
  | { type: "mention" }
  | { type: "ask"; prompt: string; ifBusy?: IfBusy };

/** Messages to the webview script. */
export type ToWebview =
  | { type: "reset"; transcript: Transcript; running: boolean }
  | { type: "action"; action: Action }
  | { type: "running"; running: boolean }
  /** The file picked for the `@` just typed (none: the picker was dismissed). */
  | { type: "mention"; path?: string }
  /** `pending`: no session is open, the next request continues this one (the daemon stopped). */
  | { type: "session"; session?: SessionNewResult; pending?: string };

export interface PanelCommands {
  cancel(): void;
  newSession(): void;
  ask(prompt: string, ifBusy?: IfBusy): void;
  /** The panel came back after a window reload: show its session again. */
  restore(): void;
  sessions(): void;
  setMode(): void;
  setModel(): void;
  pickFile(): Promise<string | undefined>;
}

export const VIEW_TYPE = "heddle.panel";
/** The chat as a view in the activity bar's Heddle container (movable to the secondary side bar). */
export const CHAT_VIEW = "heddle.chat";

export class Panel implements vscode.Disposable {
  private panel?: vscode.WebviewPanel;
  private view?: vscode.WebviewView;
  private transcript: Transcript = EMPTY;
  private running = false;
  private session?: SessionNewResult;
  private pending?: string;

  constructor(private readonly extensionUri: vscode.Uri, private readonly commands: PanelCommands) {}

  /** Show the chat: in the side bar view when it is open, else in the editor tab (opened beside). */
  show(preserveFocus = true): void {
    if (this.view?.visible) {
      this.view.show(preserveFocus);
      return;
    }
    if (this.panel) {
      this.panel.reveal(undefined, preserveFocus);
      return;
    }
    const panel = vscode.window.createWebviewPanel(
      VIEW_TYPE,
      "Heddle",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus },
      this.options(),
    );
    this.adopt(panel);
  }

  /** The serializer's half: VS Code restored the panel after a reload. */
  readonly serializer: vscode.WebviewPanelSerializer = {
    deserializeWebviewPanel: async (panel: vscode.WebviewPanel) => {
      if (this.panel && this.panel !== panel) {
        panel.dispose();
        return;
      }
      panel.webview.options = this.options();
      this.adopt(panel);
      this.commands.restore();
    },
  };

  /** The view's half: VS Code shows the chat view (opened by the user, or again after a reload). */
  readonly viewProvider: vscode.WebviewViewProvider = {
    resolveWebviewView: (view: vscode.WebviewView) => {
      view.webview.options = this.options();
      view.webview.html = this.html(view.webview);
      view.webview.onDidReceiveMessage((message: FromWebview) => this.receive(message, view.webview));
      view.onDidDispose(() => {
        if (this.view === view) this.view = undefined;
      });
      this.view = view;
      this.commands.restore();
    },
  };

  private options(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    const roots = [vscode.Uri.joinPath(this.extensionUri, "dist"), vscode.Uri.joinPath(this.extensionUri, "media")];
    return { enableScripts: true, localResourceRoots: roots };
  }

  private adopt(panel: vscode.WebviewPanel): void {
    panel.webview.html = this.html(panel.webview);
    panel.webview.onDidReceiveMessage((message: FromWebview) => this.receive(message, panel.webview));
    panel.onDidDispose(() => {
      if (this.panel === panel) this.panel = undefined;
    });
    this.panel = panel;
  }

  dispatch(action: Action): void {
    this.transcript = reduce(this.transcript, action).transcript;
    this.post({ type: "action", action });
  }

  /** Show which session (model, permission mode) the panel talks to; undefined: none yet. */
  setSession(session: SessionNewResult | undefined, pending?: string): void {
    this.session = session;
    this.pending = pending;
    this.post({ type: "session", session, pending });
  }

  setRunning(running: boolean): void {
    this.running = running;
    this.post({ type: "running", running });
  }

  dispose(): void {
    this.panel?.dispose();
  }

  private receive(message: FromWebview, from: vscode.Webview): void {
    switch (message.type) {
      case "ready":
        // Only the webview that (re)loaded starts over; the other keeps its scroll and state.
        void from.postMessage({ type: "reset", transcript: this.transcript, running: this.running } satisfies ToWebview);
        void from.postMessage({ type: "session", session: this.session, pending: this.pending } satisfies ToWebview);
        break;
      case "cancel":
        this.commands.cancel();
        break;
      case "newSession":
        this.commands.newSession();
        break;
      case "sessions":
        this.commands.sessions();
        break;
      case "setMode":
        this.commands.setMode();
        break;
      case "setModel":
        this.commands.setModel();
        break;
      case "mention":
        void this.commands.pickFile().then(
          (path) => from.postMessage({ type: "mention", path } satisfies ToWebview),
          () => from.postMessage({ type: "mention" } satisfies ToWebview),
        );
        break;
      case "ask":
        this.commands.ask(message.prompt, message.ifBusy);
        break;
    }
  }

  private post(message: ToWebview): void {
    void this.panel?.webview.postMessage(message);
    void this.view?.webview.postMessage(message);
  }

  private html(webview: vscode.Webview): string {
    const nonce = makeNonce();
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "webview.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "media", "panel.css"));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
      // No remote images: a URL in the model's markdown must not be fetched on its own.
      `img-src ${webview.cspSource} data:`,
      `font-src ${webview.cspSource}`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Heddle</title>
</head>
<body>
<header id="toolbar">
  <span id="state" role="status" aria-live="polite">Idle</span>
  <span id="session"></span>
  <button id="model" type="button" class="secondary picker" title="The model of this session's next turns">model</button>
  <button id="mode" type="button" class="secondary picker" title="The permission mode of this session's next turns">mode</button>
  <button id="cancel" type="button" hidden>Cancel</button>
  <button id="sessions" type="button" class="secondary" title="Earlier sessions: open one and continue it">Sessions</button>
  <button id="new-session" type="button" class="secondary">New session</button>
</header>
<main id="transcript"></main>
<form id="composer">
  <textarea id="prompt" rows="2" placeholder="Ask a follow-up (Enter to send, Shift+Enter for a new line, @ to mention a file)"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="queue" type="button" hidden title="Send it when the agent reaches its next step (Enter)">Queue</button>
  <button id="steer" type="button" class="secondary" hidden title="Stop what the agent is doing and answer this instead (Ctrl+Enter)">Steer</button>
</form>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}

function makeNonce(): string {
  return randomBytes(16).toString("hex");
}
