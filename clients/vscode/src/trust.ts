/**
 * Trusting a workspace's project settings (`.heddle/settings.toml`), free of any editor API:
 * what the daemon says trusting the file would enable (`workspace/trust` with `dryRun`), what
 * to do with that, and the `workspace/trust` request that trusts the reviewed content.
 */

import {
  ErrorCodes,
  Methods,
  type UntrustedSettings,
  type WorkspaceTrustParams,
  type WorkspaceTrustResult,
} from "./protocol.generated";
import type { Rpc } from "./session";

/** What the daemon says about trusting the settings file as it is now. */
export interface Review {
  settingsFile: string;
  /** Of the file's content now; undefined: there is no file, nothing to trust. */
  sha256?: string;
  /** What trusting applies that is ignored without it; empty: nothing (the file only narrows). */
  enables: string[];
  /** This content is trusted already, or needs no trust. */
  trusted: boolean;
}

/**
 * What the "Trust workspace settings" command does with a review: `noFile` and `needsNoTrust`
 * (nothing in it widens permissions) and `alreadyTrusted` only say so; `ask` asks the user.
 */
export type Verdict = "noFile" | "needsNoTrust" | "alreadyTrusted" | "ask";

/** `workspace/trust` was given a hash the file no longer has: it changed since it was shown. */
export class SettingsChangedError extends Error {}

/** One sentence listing what the daemon ignores, for a notification. */
export function describeIgnored(untrusted: UntrustedSettings): string {
  return `${untrusted.settingsFile} is not trusted, so Heddle ignores what it would enable: ${untrusted.ignored.join("; ")}.`;
}

/** Ask the daemon what trusting `workspace`'s settings as they are now would enable. */
export async function review(rpc: Rpc, workspace: string): Promise<Review> {
  const params: WorkspaceTrustParams = { workspace, dryRun: true };
  const result = await rpc.sendRequest<WorkspaceTrustResult>(Methods.WorkspaceTrust, params);
  const shown: Review = { settingsFile: result.settingsFile, enables: result.enables ?? [], trusted: result.trusted ?? true };
  if (result.sha256) shown.sha256 = result.sha256;
  return shown;
}

export function verdict(review: Review): Verdict {
  if (!review.sha256) return "noFile";
  if (!review.enables.length) return "needsNoTrust";
  return review.trusted ? "alreadyTrusted" : "ask";
}

/** Send `workspace/trust`; `SettingsChangedError` if the file is no longer `sha256`'s content. */
export async function trust(rpc: Rpc, workspace: string, sha256?: string): Promise<WorkspaceTrustResult> {
  const params: WorkspaceTrustParams = sha256 ? { workspace, sha256 } : { workspace };
  try {
    return await rpc.sendRequest<WorkspaceTrustResult>(Methods.WorkspaceTrust, params);
  } catch (error) {
    if ((error as { code?: unknown }).code === ErrorCodes.SettingsChanged) {
      throw new SettingsChangedError((error as Error).message);
    }
    throw error;
  }
}
