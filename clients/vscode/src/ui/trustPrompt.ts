/**
 * The questions about trusting a workspace's project settings: the notification when a session
 * ignores them, and the modal confirmation of "Heddle: Trust workspace settings" (or what it
 * says when there is nothing to ask).
 */

import * as vscode from "vscode";
import type { UntrustedSettings, WorkspaceTrustResult } from "../protocol.generated";
import { describeIgnored, type Review, type Verdict } from "../trust";

const REVIEW = "Review file";
const TRUST = "Trust";
const NOT_NOW = "Not now";

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

/** The modal question before trusting: what the daemon says trusting enables. True: trust. */
export async function confirmTrust(review: Review): Promise<boolean> {
  const detail = `Trusting it enables:\n${review.enables.map((line) => `• ${line}`).join("\n")}`;
  const choice = await vscode.window.showWarningMessage(
    `Trust ${review.settingsFile}?`,
    { modal: true, detail: `${detail}\n\nSessions opened from now on apply it; a changed file needs trust again.` },
    TRUST,
    REVIEW,
  );
  if (choice === REVIEW) await openSettingsFile(review.settingsFile);
  return choice === TRUST;
}

/** The command found nothing to ask about: no file, nothing in it needs trust, or trusted. */
export function showNoNeed(review: Review, verdict: Exclude<Verdict, "ask">): void {
  const file = review.settingsFile;
  if (verdict === "noFile") {
    void vscode.window.showInformationMessage(`Heddle: there is no ${file}, so there is nothing to trust.`);
    return;
  }
  const message = verdict === "alreadyTrusted"
    ? `Heddle: ${file} is already trusted as it is now; it enables ${review.enables.join("; ")}.`
    : `Heddle: nothing in ${file} needs trust: all of it applies without trust.`;
  void vscode.window.showInformationMessage(message, REVIEW).then((choice) => {
    if (choice === REVIEW) void openSettingsFile(file);
  });
}

export function showTrusted(result: WorkspaceTrustResult): void {
  const enables = result.enables?.length ? `, which enables ${result.enables.join("; ")}` : "";
  void vscode.window.showInformationMessage(
    `Heddle trusts ${result.settingsFile} now${enables}. The next request starts a new session, which applies it.`,
  );
}

export function showChanged(settingsFile: string): void {
  void vscode.window.showWarningMessage(
    `Heddle did not trust ${settingsFile}: it changed since it was shown to you. Run “Heddle: Trust workspace settings” to review it as it is now.`,
  );
}

async function openSettingsFile(settingsFile: string): Promise<void> {
  await vscode.window.showTextDocument(vscode.Uri.file(settingsFile), { preview: false });
}
