/**
 * End to end in a real VS Code (code-server with the packaged VSIX, headless chromium), in a
 * code-server of its own (the scenarios of askAgent.e2e.ts fill that file's time budget): a
 * session's MCP server that keeps dying after the session opened. Each restart is a warning in
 * the chat and the failure an error there, with the server's last output below it, and the
 * failure is a notification too.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser } from "playwright-core";
import { heddleScript, python, REPO, startScripted, tempDir, type Scripted } from "../test/support/processes";
import { startCodeServer, type CodeServer } from "./support/codeServer";
import { editorSettings, makeWorkspace, milestones, screenshot, withPage } from "./support/scenario";
import { launchBrowser, Workbench } from "./support/workbench";

const HERE = resolve(__dirname, "..", "..");
const VSIX = process.env.HEDDLE_VSIX ?? join(HERE, "dist", "heddle.vsix");

describe("an MCP server's reports in VS Code (code-server, headless chromium)", () => {
  let root: ReturnType<typeof tempDir>;
  let scripted: Scripted;
  let codeServer: CodeServer;
  let browser: Browser;

  before(async () => {
    root = tempDir("heddle-e2e-mcp-");
    scripted = await startScripted([join(HERE, "test", "scenarios", "vscode-hello.json")]);
    codeServer = await startCodeServer({ root: root.path, vsix: VSIX, settings: editorSettings(root.path, scripted.url) });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await codeServer?.stop();
    await scripted?.stop();
    if (process.env.HEDDLE_E2E_KEEP !== "1") root?.remove();
  });

  it("a server that keeps dying: warnings, then an error, in the chat with its last output and as a notification", async (t) => {
    const mark = milestones(t);
    const folder = makeWorkspace(root.path, "mcp", "vscode-hello", {});
    mkdirSync(join(folder, ".heddle"));
    // startup_timeout = 0: the session opens before the server's first start, so each of its
    // deaths (it exits at once, saying `not today`) comes after the session opened.
    writeFileSync(join(folder, ".heddle", "settings.toml"), [
      "[mcp]", "startup_timeout = 0", "", "[mcp.servers.srv]", `command = ${JSON.stringify(python())}`,
      `args = ["-I", ${JSON.stringify(join(REPO, "tests", "e2e", "mcp_server.py"))}]`,
      'env = { MCP_TEST_EXIT_AT_START = "1" }', "",
    ].join("\n"));
    // A project's servers start once it is trusted: trusted beforehand, in the daemon's config
    // folder (code-server's, which the daemon inherits).
    execFileSync(heddleScript(), ["trust", "-y", "-w", folder], { env: { ...process.env, XDG_CONFIG_HOME: join(root.path, "xdg", "config") } });
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    mark("workbench loaded");
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      const panel = workbench.panel();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Hello");
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      mark("turn completed");

      const failed = panel.locator('section.notice[data-level="error"]', { hasText: "MCP server srv failed (exited with code 7) and was restarted 3 times" });
      await failed.waitFor({ timeout: 60000 });
      mark("the failure shown");
      assert.equal(await failed.locator("pre.detail").innerText(), "not today");
      const restarts = panel.locator('section.notice[data-level="warning"]', { hasText: "MCP server srv stopped (exited with code 7); restarting it in" });
      assert.equal(await restarts.count(), 3);
      assert.equal(await restarts.first().locator("pre.detail").innerText(), "not today");
      await page.locator(".notification-toast", { hasText: "MCP server srv failed (exited with code 7)" }).waitFor();
      await screenshot(workbench, "vscode-mcp-failed");
    });
  });
});
