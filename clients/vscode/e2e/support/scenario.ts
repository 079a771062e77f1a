/**
 * What the end-to-end scenarios share: a workspace folder per scenario, screenshots, timing
 * milestones in the test log, and a page that is always closed (with a screenshot on failure).
 */

import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { TestContext } from "node:test";
import { heddleScript } from "../../test/support/processes";
import type { Workbench } from "./workbench";

const HERE = resolve(__dirname, "..", "..");
const REPO = resolve(HERE, "..", "..");
const ARTIFACTS = join(HERE, ".e2e", "artifacts");

/**
 * The editor's settings for a suite under `root`: the extension starts the daemon from this
 * checkout against the scripted model server at `modelUrl`; nothing of VS Code's gets in the way.
 */
export function editorSettings(root: string, modelUrl: string): Record<string, unknown> {
  return {
    "heddle.server.command": heddleScript(),
    "heddle.server.env": {
      ANTHROPIC_BASE_URL: modelUrl,
      ANTHROPIC_API_KEY: "test",
      XDG_STATE_HOME: join(root, "daemon-state"),
    },
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "security.workspace.trust.enabled": false,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "window.commandCenter": false,
    "editor.minimap.enabled": false,
    // The edit scenarios keep unsaved changes in buffers.
    "files.autoSave": "off",
    "files.hotExit": "off",
  };
}

export function makeWorkspace(root: string, name: string, model: string, files: Record<string, string>, settings: Record<string, unknown> = {}): string {
  const folder = join(root, name);
  mkdirSync(join(folder, ".vscode"), { recursive: true });
  writeFileSync(join(folder, ".vscode", "settings.json"), JSON.stringify({ "heddle.model": model, ...settings }, null, 2));
  for (const [file, text] of Object.entries(files)) writeFileSync(join(folder, file), text);
  return folder;
}

export async function screenshot(workbench: Workbench, name: string, forDocs = false): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = join(ARTIFACTS, `${name}.png`);
  await workbench.page.screenshot({ path: file });
  if (forDocs && process.env.HEDDLE_UPDATE_SCREENSHOTS === "1") {
    copyFileSync(file, join(REPO, "docs", "images", `${name}.png`));
  }
}

/** Logs how long into the test each milestone came, for the CI log. */
export function milestones(t: TestContext): (what: string) => void {
  const start = Date.now();
  return (what) => t.diagnostic(`${((Date.now() - start) / 1000).toFixed(1)}s ${what}`);
}

/** Run `body`; on failure keep a screenshot of the page for the CI log. */
export async function withPage(t: TestContext, workbench: Workbench, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (error) {
    await screenshot(workbench, `failure-${t.name.replace(/\W+/g, "-").slice(0, 60)}`).catch(() => undefined);
    throw error;
  } finally {
    await workbench.close();
  }
}
