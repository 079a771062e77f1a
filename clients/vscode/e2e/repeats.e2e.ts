/**
 * End to end in a real VS Code (code-server with the packaged VSIX, headless chromium), in a
 * code-server of its own: the repeat guard. The agent makes the same search four times; the
 * chat shows the notice, the quick pick asks whether the turn goes on, and "Let it go on" lets
 * the model answer.
 */

import assert from "node:assert/strict";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser } from "playwright-core";
import { startScripted, tempDir, type Scripted } from "../test/support/processes";
import { startCodeServer, type CodeServer } from "./support/codeServer";
import { editorSettings, makeWorkspace, milestones, screenshot, withPage } from "./support/scenario";
import { launchBrowser, Workbench } from "./support/workbench";

const HERE = resolve(__dirname, "..", "..");
const VSIX = process.env.HEDDLE_VSIX ?? join(HERE, "dist", "heddle.vsix");

describe("the repeat guard in VS Code (code-server, headless chromium)", () => {
  let root: ReturnType<typeof tempDir>;
  let scripted: Scripted;
  let codeServer: CodeServer;
  let browser: Browser;

  before(async () => {
    root = tempDir("heddle-e2e-repeats-");
    scripted = await startScripted([join(HERE, "test", "scenarios", "vscode-repeats.json")]);
    codeServer = await startCodeServer({ root: root.path, vsix: VSIX, settings: editorSettings(root.path, scripted.url) });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await codeServer?.stop();
    await scripted?.stop();
    if (process.env.HEDDLE_E2E_KEEP !== "1") root?.remove();
  });

  it("an agent repeating a search: the notice in the chat, the question in a quick pick, and the turn let go on", async (t) => {
    const mark = milestones(t);
    const folder = makeWorkspace(root.path, "repeats", "vscode-repeats", {});
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    mark("workbench loaded");
    await withPage(t, workbench, async () => {
      const panel = workbench.panel();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Find the text");

      const notice = panel.locator('section.notice[data-level="warning"]', { hasText: "Repeating itself: the agent made the same Grep call 4 times in a row with the same result" });
      await notice.waitFor();
      await workbench.quickInput.filter({ hasText: "Heddle is repeating itself" }).waitFor();
      mark("notice and question shown");
      assert.equal(await panel.locator('section.tool[data-status="ok"]').count(), 3);
      assert.equal(await panel.locator('section.tool[data-status="rejected"]').count(), 1, "the 4th search did not run");
      await screenshot(workbench, "vscode-repeats");
      await workbench.quickInputRow("Let it go on").click();

      await panel.locator("section.assistant", { hasText: "I stopped searching: the text is not in this project." }).waitFor();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      mark("the turn went on");
    });
  });
});
