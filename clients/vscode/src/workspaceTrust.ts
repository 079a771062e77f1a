/**
 * Trust from VS Code: the notification when a session ignores the project settings for want
 * of trust, and the "Heddle: Trust workspace settings" command, which asks the daemon what
 * trusting the file as it is now would enable. Both end in `workspace/trust` with the hash of
 * the content the user was shown; trust applies to sessions opened after it, so `onTrusted`
 * makes the next request open one.
 */

import * as vscode from "vscode";
import type { SessionNewResult, WorkspaceTrustResult } from "./protocol.generated";
import type { Rpc } from "./session";
import { review, SettingsChangedError, trust, verdict, type Review } from "./trust";
import { confirmTrust, offerTrust, showChanged, showNoNeed, showTrusted } from "./ui/trustPrompt";

export class WorkspaceTrust {
  constructor(private readonly rpc: Rpc, private readonly onTrusted: (result: WorkspaceTrustResult) => void) {}

  /** A session opened: if it ignores settings for want of trust, offer to trust them. */
  async sessionOpened(session: SessionNewResult): Promise<void> {
    const untrusted = session.untrustedSettings;
    if (untrusted && (await offerTrust(untrusted))) {
      await this.trust(session.workspace, untrusted.settingsFile, untrusted.sha256);
    }
  }

  /** "Heddle: Trust workspace settings" for `workspace`: review, confirm (modal), trust. */
  async command(workspace: string | undefined): Promise<void> {
    if (!workspace) {
      void vscode.window.showErrorMessage("Heddle needs a folder: open one, then trust its settings.");
      return;
    }
    let shown: Review;
    try {
      shown = await review(this.rpc, workspace);
    } catch (error) {
      void vscode.window.showErrorMessage(`Heddle could not review the settings of ${workspace}: ${messageOf(error)}`);
      return;
    }
    const what = verdict(shown);
    if (what !== "ask") showNoNeed(shown, what);
    else if (await confirmTrust(shown)) await this.trust(workspace, shown.settingsFile, shown.sha256!);
  }

  private async trust(workspace: string, settingsFile: string, sha256: string): Promise<void> {
    try {
      const result = await trust(this.rpc, workspace, sha256);
      this.onTrusted(result);
      showTrusted(result);
    } catch (error) {
      if (error instanceof SettingsChangedError) showChanged(settingsFile);
      else void vscode.window.showErrorMessage(`Heddle could not trust ${settingsFile}: ${messageOf(error)}`);
    }
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
