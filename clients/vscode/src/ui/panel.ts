/**
 * The Heddle panel: a webview that shows the conversation as it streams. The extension keeps
 * the transcript and sends each action to the webview, which runs the same reducer; a panel
 * that is reopened or reloaded gets the whole transcript again.
 */

import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import type { SessionNewResult } from "../protocol.generated";
import { EMPTY, reduce, type Action, type Transcript } from "../transcript";

/** Messages from the webview script (src/webview/main.ts). */
export type FromWebview =
  | { type: "ready" }
  | { type: "cancel" }
  | { type: "newSession" }
  | { type: "ask"; prompt: string };

/** Messages to the webview script. */
export type ToWebview =
  | { type: "reset"; transcript: Transcript; running: boolean }
  | { type: "action"; action: Action }
  | { type: "running"; running: boolean }
  | { type: "session"; session?: SessionNewResult };

export interface PanelCommands {
  cancel(): void;
  newSession(): void;
  ask(prompt: string): void;
}

export class Panel implements vscode.Disposable {
  private panel?: vscode.WebviewPanel;
  private transcript: Transcript = EMPTY;
  private running = false;
  private session?: SessionNewResult;

  constructor(private readonly extensionUri: vscode.Uri, private readonly commands: PanelCommands) {}

  show(preserveFocus = true): void {
    if (this.panel) {
      this.panel.reveal(undefined, preserveFocus);
      return;
    }
    const roots = [vscode.Uri.joinPath(this.extensionUri, "dist"), vscode.Uri.joinPath(this.extensionUri, "media")];
    const panel = vscode.window.createWebviewPanel(
      "heddle.panel",
      "Heddle",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus },
      { enableScripts: true, localResourceRoots: roots },
    );
    panel.webview.html = this.html(panel.webview);
    panel.webview.onDidReceiveMessage((message: FromWebview) => this.receive(message));
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
  setSession(session: SessionNewResult | undefined): void {
    this.session = session;
    this.post({ type: "session", session });
  }

  setRunning(running: boolean): void {
    this.running = running;
    this.post({ type: "running", running });
  }

  dispose(): void {
    this.panel?.dispose();
  }

  private receive(message: FromWebview): void {
    switch (message.type) {
      case "ready":
        this.post({ type: "reset", transcript: this.transcript, running: this.running });
        this.post({ type: "session", session: this.session });
        break;
      case "cancel":
        this.commands.cancel();
        break;
      case "newSession":
        this.commands.newSession();
        break;
      case "ask":
        this.commands.ask(message.prompt);
        break;
    }
  }

  private post(message: ToWebview): void {
    void this.panel?.webview.postMessage(message);
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
  <button id="cancel" type="button" hidden>Cancel</button>
  <button id="new-session" type="button" class="secondary">New session</button>
</header>
<main id="transcript"></main>
<form id="composer">
  <textarea id="prompt" rows="2" placeholder="Ask a follow-up (Enter to send, Shift+Enter for a new line)"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}

function makeNonce(): string {
  return randomBytes(16).toString("hex");
}
