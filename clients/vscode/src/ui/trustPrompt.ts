/**
 * The questions about trusting a workspace's project settings: the notification when a session
 * ignores them, and the modal confirmation of "Heddle: Trust workspace settings".
 */

import * as vscode from "vscode";
import type { UntrustedSettings, WorkspaceTrustResult } from "../protocol.generated";
import { describeIgnored, type Review } from "../trust";

const REVIEW = "Review file";
const TRUST = "Trust";
const NOT_NOW = "Not now";
/** Lines of the file a modal shows, when the daemon has not said what it enables. */
const CONTENT_LINES = 40;

/**
 * The notification a session's `untrustedSettings` brings. "Review file" opens the file and
 * asks again; resolves true for "Trust".
 */
export async function offerTrust(untrusted: UntrustedSettings): Promise<boolean> {
  const message = `Heddle: ${describeIgnored(untrusted)} Trust it only if you wrote it or have checked it.`;
  let choice = await vscode.window.showWarningMessage(message, REVIEW, TRUST, NOT_NOW);
  if (choice === REVIEW) {
    await openSettingsFile(untrusted.settingsFile);
    choice = await vscode.window.showWarningMessage(message, TRUST, NOT_NOW);
  }
  return choice === TRUST;
}

/** The modal question before trusting; "Review file" opens the file instead. True: trust. */
export async function confirmTrust(review: Review): Promise<boolean> {
  const detail = review.enables
    ? `Trusting it enables:\n${review.enables.map((line) => `• ${line}`).join("\n")}`
    : `No session has read the file as it is now, so Heddle cannot say what it enables. Its content:\n\n${excerpt(review.content ?? "")}`;
  const choice = await vscode.window.showWarningMessage(
    `Trust ${review.settingsFile}?`,
    { modal: true, detail: `${detail}\n\nSessions opened from now on apply it; a changed file needs trust again.` },
    TRUST,
    REVIEW,
  );
  if (choice === REVIEW) await openSettingsFile(review.settingsFile);
  return choice === TRUST;
}

export function showTrusted(result: WorkspaceTrustResult): void {
  const enables = result.enables?.length ? `, which enables ${result.enables.join("; ")}` : "";
  void vscode.window.showInformationMessage(
    `Heddle trusts ${result.settingsFile} now${enables}. The next request starts a new session, which applies it.`,
  );
}

export function showNothingToTrust(settingsFile: string): void {
  void vscode.window.showInformationMessage(`Heddle: there is no ${settingsFile}, so there is nothing to trust.`);
}

export function showChanged(settingsFile: string): void {
  void vscode.window.showWarningMessage(
    `Heddle did not trust ${settingsFile}: it changed since it was shown to you. Run “Heddle: Trust workspace settings” to review it as it is now.`,
  );
}

async function openSettingsFile(settingsFile: string): Promise<void> {
  await vscode.window.showTextDocument(vscode.Uri.file(settingsFile), { preview: false });
}

function excerpt(content: string): string {
  const lines = content.split("\n");
  if (lines.length <= CONTENT_LINES) return content.trimEnd();
  return `${lines.slice(0, CONTENT_LINES).join("\n")}\n… (${lines.length - CONTENT_LINES} more lines: review the file)`;
}
