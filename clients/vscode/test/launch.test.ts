/**
 * The extension's two ways to start the daemon (src/launch.ts), each run as the extension runs
 * it: in the workspace folder, here one full of modules named like the daemon's own.
 */

import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { launchFor } from "../src/launch";
import { deadline, heddleScript, python, startDaemon, startScripted, tempDir, type Scripted } from "./support/processes";

const SCENARIO = join(__dirname, "..", "..", "test", "scenarios", "vscode-launch.json");
const SHADOWING = ["json", "msgspec", "anyio", "anthropic", "aiohttp", "lsprotocol", "asyncio", "logging", "typing"];

/** Each of these stops the process that imports it, saying which it is. */
function shadowingWorkspace(root: string): string {
  for (const name of SHADOWING) writeFileSync(join(root, `${name}.py`), `raise SystemExit('this is the project ${name}.py')\n`);
  for (const name of ["heddle", "heddle_protocol", "pygls"]) {
    mkdirSync(join(root, name));
    writeFileSync(join(root, name, "__init__.py"), `raise SystemExit('this is the project ${name}/')\n`);
  }
  return root;
}

describe("the daemon started as the extension starts it, in a workspace that shadows its modules", () => {
  let scripted: Scripted;
  let workspace: ReturnType<typeof tempDir>;
  let state: ReturnType<typeof tempDir>;

  before(async () => {
    scripted = await startScripted([SCENARIO]);
    workspace = tempDir("heddle-shadow-");
    state = tempDir("heddle-state-");
    shadowingWorkspace(workspace.path);
  });

  after(async () => {
    await scripted?.stop();
    workspace?.remove();
    state?.remove();
  });

  const launches = {
    "heddle.server.pythonPath": () => launchFor(python(), "", {}),
    "heddle.server.command": () => launchFor("", heddleScript(), {}),
  };
  for (const [setting, launch] of Object.entries(launches)) {
    it(`${setting}: the daemon answers a turn`, async () => {
      const env = { ANTHROPIC_BASE_URL: scripted.url, ANTHROPIC_API_KEY: "test", XDG_STATE_HOME: state.path };
      const daemon = await startDaemon(env, workspace.path, launch());
      try {
        const session = await deadline(
          daemon.connection.sendRequest<{ sessionId: string }>("session/new", { workspace: workspace.path, model: "vscode-launch" }),
          20000,
          "session/new",
        );
        const result = await deadline(
          daemon.connection.sendRequest<{ reason: string }>("turn/start", { sessionId: session.sessionId, prompt: "hello" }),
          30000,
          "the turn",
        );
        assert.equal(result.reason, "completed");
        assert.doesNotMatch(daemon.stderr(), /this is the project/);
      } catch (error) {
        throw new Error(`${(error as Error).message}\n--- daemon stderr ---\n${daemon.stderr()}`);
      } finally {
        await daemon.stop();
      }
    });
  }
});
