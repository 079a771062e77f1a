/**
 * Trust from VS Code: the notification when a session ignores the project settings for want
 * of trust, and the "Heddle: Trust workspace settings" command. Both end in `workspace/trust`;
 * trust applies to sessions opened after it, so `onTrusted` makes the next request open one.
 */

import * as vscode from "vscode";
import type { SessionNewResult, WorkspaceTrustResult } from "./protocol.generated";
import type { Rpc } from "./session";
import { KnownSettings, review, SettingsChangedError, trust } from "./trust";
import { confirmTrust, offerTrust, showChanged, showNothingToTrust, showTrusted } from "./ui/trustPrompt";

export class WorkspaceTrust {
  private readonly known = new KnownSettings();

  constructor(private readonly rpc: Rpc, private readonly onTrusted: (result: WorkspaceTrustResult) => void) {}

  /** A session opened: if it ignores settings for want of trust, offer to trust them. */
  async sessionOpened(session: SessionNewResult): Promise<void> {
    await this.known.remember(session);
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
    const shown = await review(workspace, await this.known.get(workspace));
    if (!shown.sha256) {
      showNothingToTrust(shown.settingsFile);
      return;
    }
    if (await confirmTrust(shown)) await this.trust(workspace, shown.settingsFile, shown.sha256);
  }

  private async trust(workspace: string, settingsFile: string, sha256: string): Promise<void> {
    try {
      const result = await trust(this.rpc, workspace, sha256);
      await this.known.forget(workspace);
      this.onTrusted(result);
      showTrusted(result);
    } catch (error) {
      if (error instanceof SettingsChangedError) {
        await this.known.forget(workspace);
        showChanged(settingsFile);
      } else {
        void vscode.window.showErrorMessage(`Heddle could not trust ${settingsFile}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
}
