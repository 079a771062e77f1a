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

/**
 * The context meter: how much of the model's window the conversation fills, from the turn's
 * `usage` events, and the last compaction. Hidden until a session reports its size.
 */
export class ContextMeter implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("heddle.context", vscode.StatusBarAlignment.Left, 99);
  private tokens = 0;
  private window = 0;
  private compacted?: string;

  constructor() {
    this.item.name = "Heddle context";
  }

  update(tokens: number | undefined, window: number | undefined): void {
    if (!tokens || !window) return;
    this.tokens = tokens;
    this.window = window;
    this.paint();
  }

  compaction(before: number, after: number): void {
    this.compacted = `compacted at ${new Date().toLocaleTimeString()}: ${formatTokens(before)} → ${formatTokens(after)} tokens`;
    this.tokens = after;
    this.paint();
  }

  /** A new session: nothing known yet. */
  reset(): void {
    this.tokens = 0;
    this.window = 0;
    this.compacted = undefined;
    this.item.hide();
  }

  dispose(): void {
    this.item.dispose();
  }

  private paint(): void {
    if (!this.window) return;
    const share = Math.min(100, Math.round((this.tokens / this.window) * 100));
    this.item.text = `$(dashboard) ${share}%`;
    const lines = [`Heddle context: ${formatTokens(this.tokens)} of ${formatTokens(this.window)} tokens (${share}%)`];
    if (this.compacted) lines.push(this.compacted);
    this.item.tooltip = lines.join("\n");
    this.item.accessibilityInformation = { label: `Heddle context ${share}% used${this.compacted ? ", " + this.compacted : ""}` };
    this.item.backgroundColor = share >= 90 ? new vscode.ThemeColor("statusBarItem.warningBackground") : undefined;
    this.item.show();
  }
}

function formatTokens(n: number): string {
  return n >= 1000 ? `${Math.round(n / 100) / 10}k` : String(n);
}
