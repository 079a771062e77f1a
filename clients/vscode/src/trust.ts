/**
 * Trusting a workspace's project settings (`.heddle/settings.toml`), free of any editor API:
 * what to show the user before they trust it, and the `workspace/trust` request.
 *
 * What trusting would enable is known from the `untrustedSettings` of a session the daemon
 * opened on the workspace; before any session, the review is the file itself, and its hash
 * makes the daemon trust only the content the user was shown.
 */

import { createHash } from "node:crypto";
import { readFile, realpath } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  ErrorCodes,
  Methods,
  type SessionNewResult,
  type UntrustedSettings,
  type WorkspaceTrustParams,
  type WorkspaceTrustResult,
} from "./protocol.generated";
import type { Rpc } from "./session";

/** What the user is shown before trusting; `sha256` undefined: there is no file to trust. */
export interface Review {
  settingsFile: string;
  sha256?: string;
  /** What trusting enables, from the daemon; undefined: unknown, review `content` instead. */
  enables?: string[];
  /** The file as read, when the daemon has not said what it enables. */
  content?: string;
}

/** `workspace/trust` was given a hash the file no longer has: it changed since it was shown. */
export class SettingsChangedError extends Error {}

export function settingsPath(workspace: string): string {
  return join(workspace, ".heddle", "settings.toml");
}

/** One sentence listing what the daemon ignores, for a notification. */
export function describeIgnored(untrusted: UntrustedSettings): string {
  return `${untrusted.settingsFile} is not trusted, so Heddle ignores what it would enable: ${untrusted.ignored.join("; ")}.`;
}

/** The `untrustedSettings` of the latest session on each workspace (keyed by its real path). */
export class KnownSettings {
  private readonly known = new Map<string, UntrustedSettings>();

  /** Remember what a session result says; a result without it means nothing is ignored now. */
  async remember(session: SessionNewResult): Promise<void> {
    const key = await canonical(session.workspace);
    if (session.untrustedSettings) this.known.set(key, session.untrustedSettings);
    else this.known.delete(key);
  }

  async get(workspace: string): Promise<UntrustedSettings | undefined> {
    return this.known.get(await canonical(workspace));
  }

  async forget(workspace: string): Promise<void> {
    this.known.delete(await canonical(workspace));
  }
}

/** What to show before trusting `workspace`'s settings: what a session said, else the file. */
export async function review(workspace: string, known?: UntrustedSettings): Promise<Review> {
  if (known) return { settingsFile: known.settingsFile, sha256: known.sha256, enables: known.ignored };
  const settingsFile = settingsPath(workspace);
  let data: Buffer;
  try {
    data = await readFile(settingsFile);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { settingsFile };
    throw error;
  }
  return { settingsFile, sha256: createHash("sha256").update(data).digest("hex"), content: data.toString("utf8") };
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

/** The daemon reports real paths: compare workspaces that way (a symlinked folder, `..`). */
async function canonical(folder: string): Promise<string> {
  return realpath(folder).catch(() => resolve(folder));
}
