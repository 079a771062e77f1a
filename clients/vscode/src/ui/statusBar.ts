/** The status-bar item: idle it offers "Ask agent"; while a turn runs it spins and cancels. */

import * as vscode from "vscode";

export class StatusItem implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("heddle.status", vscode.StatusBarAlignment.Left, 100);

  constructor() {
    this.item.name = "Heddle";
    this.idle();
    this.item.show();
  }

  idle(note?: string): void {
    this.item.text = "$(comment-discussion) Heddle";
    this.item.tooltip = note ? `Heddle: ${note}. Click to ask the agent.` : "Heddle: click to ask the agent";
    this.item.command = "heddle.ask";
    this.item.accessibilityInformation = { label: "Heddle: ask the agent", role: "button" };
    this.item.backgroundColor = undefined;
  }

  running(activity: string): void {
    this.item.text = `$(loading~spin) Heddle: ${activity}`;
    this.item.tooltip = "Heddle is working. Click to cancel the turn.";
    this.item.command = "heddle.cancel";
    this.item.accessibilityInformation = { label: "Heddle: cancel the running turn", role: "button" };
  }

  stopped(): void {
    this.item.text = "$(error) Heddle";
    this.item.tooltip = "The Heddle daemon is not running. Click to restart it.";
    this.item.command = "heddle.restartDaemon";
    this.item.accessibilityInformation = { label: "Heddle: restart the daemon", role: "button" };
    this.item.backgroundColor = new vscode.ThemeColor("statusBarItem.errorBackground");
  }

  dispose(): void {
    this.item.dispose();
  }
}
