/**
 * A real VS Code for the end-to-end tests: code-server 4.100.3 (installed by scripts/setup.sh)
 * with the packaged VSIX installed into a throwaway profile, started in its own process group
 * and killed as a group, so no extension host or daemon outlives the test.
 */

import { execFile, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { deadline, killGroup, spawnGroup } from "../../test/support/processes";

const HERE = resolve(__dirname, "..", "..");
export const CODE_SERVER = process.env.HEDDLE_CODE_SERVER ?? join(HERE, ".e2e", "code-server", "node_modules", ".bin", "code-server");

export interface CodeServer {
  url: string;
  userDataDir: string;
  log(): string;
  stop(): Promise<void>;
}

export interface CodeServerOptions {
  root: string;
  vsix: string;
  /** Written to the profile's User/settings.json and to the remote Machine/settings.json. */
  settings: Record<string, unknown>;
}

export async function startCodeServer(options: CodeServerOptions): Promise<CodeServer> {
  const userDataDir = join(options.root, "user-data");
  const extensionsDir = join(options.root, "extensions");
  const xdg = join(options.root, "xdg");
  for (const dir of [join(userDataDir, "User"), join(userDataDir, "Machine"), extensionsDir, xdg]) mkdirSync(dir, { recursive: true });
  const config = join(options.root, "code-server.yaml");
  writeFileSync(config, "bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n");
  writeFileSync(join(userDataDir, "User", "settings.json"), JSON.stringify(options.settings, null, 2));
  // code-server's window is a remote one, where settings of scope `machine` (`heddle.server.*`)
  // belong in the remote settings: read from the user settings alone, they were missing now and
  // then after a window reload, and the daemon was started as a bare `heddle` (not on PATH).
  writeFileSync(join(userDataDir, "Machine", "settings.json"), JSON.stringify(options.settings, null, 2));
  // Keep everything code-server and the editor write out of $HOME.
  const env = { ...process.env, XDG_CONFIG_HOME: join(xdg, "config"), XDG_DATA_HOME: join(xdg, "data"), XDG_STATE_HOME: join(xdg, "state"), XDG_CACHE_HOME: join(xdg, "cache") };
  const common = ["--config", config, "--user-data-dir", userDataDir, "--extensions-dir", extensionsDir];

  const install = await deadline(
    promisify(execFile)(CODE_SERVER, [...common, "--install-extension", options.vsix], { env, timeout: 60000 }),
    65000,
    "installing the VSIX",
  );
  if (!/successfully installed/i.test(install.stdout + install.stderr)) {
    throw new Error(`installing ${options.vsix} failed:\n${install.stdout}${install.stderr}`);
  }

  const child: ChildProcess = spawnGroup(
    CODE_SERVER,
    [...common, "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override"],
    { env, stdio: ["ignore", "pipe", "pipe"] },
  );
  let log = "";
  const collect = (text: string) => {
    log += text;
  };
  child.stdout!.setEncoding("utf8").on("data", collect);
  child.stderr!.setEncoding("utf8").on("data", collect);
  const url = await deadline(
    new Promise<string>((resolveUrl, reject) => {
      const look = () => {
        const match = /HTTP server listening on (http:\/\/\S+?)\/?\s/.exec(log);
        if (match) resolveUrl(match[1]);
      };
      child.stdout!.on("data", look);
      child.stderr!.on("data", look);
      child.once("exit", (code) => reject(new Error(`code-server exited with ${code}:\n${log}`)));
    }),
    30000,
    "code-server to listen",
  ).catch(async (error) => {
    await killGroup(child);
    throw error;
  });
  await deadline(waitHealthy(url), 30000, "code-server /healthz").catch(async (error) => {
    await killGroup(child);
    throw error;
  });
  return { url, userDataDir, log: () => log, stop: () => killGroup(child) };
}

async function waitHealthy(url: string): Promise<void> {
  for (;;) {
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) return;
    } catch {
      // Not accepting connections yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
