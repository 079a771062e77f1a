/**
 * Real processes for the tests: the scripted model server and the Heddle daemon, each in its
 * own process group so teardown kills everything it started, with every wait bounded.
 */

import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import {
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  type MessageConnection,
} from "vscode-jsonrpc/node";
import { launchFor, type DaemonLaunch } from "../../src/launch";
import type { ServerHeddleCapabilities } from "../../src/protocol.generated";

/** The repository root (tests run bundled, from clients/vscode/out/<dir>/). */
export const REPO = resolve(__dirname, "..", "..", "..", "..");

/** The Python that has Heddle installed: HEDDLE_PYTHON, else the repo's .venv. */
export function python(): string {
  return process.env.HEDDLE_PYTHON ?? join(REPO, ".venv", "bin", "python");
}

/** The `heddle` console script installed next to that Python. */
export function heddleScript(): string {
  return join(dirname(python()), "heddle");
}

export function deadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Process groups started here; killed even if the test process is interrupted. */
const groups = new Set<number>();

function killAllGroups(): void {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  groups.clear();
}

process.once("exit", killAllGroups);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    killAllGroups();
    process.exit(128 + (signal === "SIGINT" ? 2 : signal === "SIGTERM" ? 15 : 1));
  });
}

/** Spawn `command` as the leader of a new process group (like setsid), remembered for teardown. */
export function spawnGroup(command: string, args: string[], options: SpawnOptions): ChildProcess {
  const child = spawn(command, args, { ...options, detached: true });
  if (child.pid !== undefined) groups.add(child.pid);
  return child;
}

/**
 * Kill a child's whole process group: SIGTERM, SIGKILL if the leader has not exited within
 * `ms`, and SIGKILL for whatever of the group outlived its leader (an extension host, a daemon).
 */
export async function killGroup(child: ChildProcess, ms = 5000): Promise<void> {
  const pgid = child.pid;
  if (pgid === undefined) return;
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-pgid, sig);
    } catch {
      // The group is gone.
    }
  };
  const running = child.exitCode === null && child.signalCode === null;
  const exited = running ? new Promise<void>((done) => child.once("exit", () => done())) : Promise.resolve();
  signal("SIGTERM");
  const timer = setTimeout(() => signal("SIGKILL"), ms);
  try {
    await deadline(exited, ms + 2000, `process ${pgid} to exit`);
  } finally {
    clearTimeout(timer);
    signal("SIGKILL");
    groups.delete(pgid);
  }
}

export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export interface Scripted {
  url: string;
  stop(): Promise<void>;
}

/** Start `python -m heddle.scripted` serving the scenario files given. */
export async function startScripted(scenarioFiles: string[], log?: (line: string) => void): Promise<Scripted> {
  const args = ["-I", "-m", "heddle.scripted", "--port", "0", "--quiet", ...scenarioFiles.flatMap((f) => ["--scenario", f])];
  const child = spawnGroup(python(), args, { stdio: ["ignore", "pipe", "pipe"] });
  child.stderr!.setEncoding("utf8").on("data", (text: string) => log?.(text));
  const url = await deadline(
    new Promise<string>((resolveUrl, reject) => {
      let buffered = "";
      child.stdout!.setEncoding("utf8").on("data", (text: string) => {
        buffered += text;
        const match = /listening on (\S+)/.exec(buffered);
        if (match) resolveUrl(match[1]);
      });
      child.once("exit", (code) => reject(new Error(`the scripted model server exited with ${code}`)));
      child.once("error", reject);
    }),
    20000,
    "the scripted model server to listen",
  ).catch(async (error) => {
    await killGroup(child);
    throw error;
  });
  return { url, stop: () => killGroup(child) };
}

export interface DaemonProcess {
  connection: MessageConnection;
  server: ServerHeddleCapabilities;
  /** All of `initialize`'s server capabilities. */
  capabilities: Record<string, unknown>;
  stderr(): string;
  stop(): Promise<void>;
}

/**
 * Start the real daemon over stdio, as the extension does (by default its `heddle.server.pythonPath`
 * launch), and run `initialize`, announcing permission requests.
 */
export async function startDaemon(
  env: Record<string, string>,
  cwd: string,
  launch: DaemonLaunch = launchFor(python(), "", {}),
): Promise<DaemonProcess> {
  const child = spawnGroup(launch.command, launch.args, {
    cwd,
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, ...launch.env, ...env },
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (text: string) => {
    stderr += text;
  });
  const connection = createMessageConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
  connection.listen();
  const stop = async () => {
    try {
      await deadline(connection.sendRequest("shutdown"), 3000, "shutdown");
      await connection.sendNotification("exit");
    } catch {
      // The group kill below ends it anyway.
    }
    connection.dispose();
    await killGroup(child);
  };
  const exited = new Promise<never>((_, reject) => {
    child.once("exit", (code, signal) => reject(new Error(`the daemon exited (${signal ?? code}) before initialize`)));
    child.once("error", reject);
  });
  try {
    const initialize = connection.sendRequest<{ capabilities: Record<string, unknown> & { experimental?: { heddle?: ServerHeddleCapabilities } } }>("initialize", {
      processId: process.pid,
      rootUri: null,
      capabilities: { experimental: { heddle: { permissionRequests: true } } },
    });
    const result = await deadline(Promise.race([initialize, exited]), 20000, "initialize");
    await connection.sendNotification("initialized", {});
    const server = result.capabilities.experimental?.heddle;
    if (!server) throw new Error("initialize returned no capabilities.experimental.heddle");
    return { connection, server, capabilities: result.capabilities, stderr: () => stderr, stop };
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}\n--- daemon stderr ---\n${stderr}`);
  }
}
