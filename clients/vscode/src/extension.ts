/**
 * Activation: starts the daemon as soon as the editor has finished starting (so the first
 * request does not wait for it) and registers the commands, the chat view and the panel's
 * serializer.
 */

import * as vscode from "vscode";
import { Commands } from "./commands";
import { Daemon } from "./daemon";
import { CHAT_VIEW, VIEW_TYPE } from "./ui/panel";

let daemon: Daemon | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel("Heddle", { log: true });
  daemon = new Daemon(log);
  const commands = new Commands(daemon, context.extensionUri, log, context.workspaceState);
  context.subscriptions.push(
    log,
    commands,
    daemon,
    vscode.window.registerWebviewPanelSerializer(VIEW_TYPE, commands.serializer),
    // Kept alive when hidden: a turn streams into it while another view is in front.
    vscode.window.registerWebviewViewProvider(CHAT_VIEW, commands.viewProvider, { webviewOptions: { retainContextWhenHidden: true } }),
  );
  daemon.ready().catch((error: unknown) => log.error(String(error instanceof Error ? error.message : error)));
}

export async function deactivate(): Promise<void> {
  await daemon?.stop();
}
