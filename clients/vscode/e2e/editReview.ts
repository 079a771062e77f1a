/**
 * End to end, the editor owns the buffers (run in askAgent.e2e.ts's suite, to share its
 * code-server):
 *
 *  - an unsaved line in app.py, then an agent edit elsewhere in it: the model read the buffer,
 *    the buffer holds both, the disk nothing new (`heddle.saveAfterEdit` ifClean: the file had
 *    unsaved changes); with `always` the next edit is saved, the user's line with it;
 *  - three hunks, the middle one rejected with a message: the file holds exactly the others,
 *    and the next request to the model carries the decision and the message;
 *  - the user edits the proposal: the model sees the text that was written;
 *  - the file changes while the review is open: the tool result says so and nothing is written;
 *  - an edit breaks an open JSON file: the tool result carries the syntax error VS Code's JSON
 *    validation reports after the edit (`diagnostics/list`).
 */

import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import type { Browser } from "playwright-core";
import type { CodeServer } from "./support/codeServer";
import { makeWorkspace, milestones, screenshot, withPage } from "./support/scenario";
import { Workbench } from "./support/workbench";

export const EDIT_MODELS = ["vscode-sync", "vscode-sync-always", "vscode-hunks", "vscode-own-text", "vscode-changed-meanwhile", "vscode-diagnostics"];

interface Suite {
  root: string;
  codeServer: CodeServer;
  browser: Browser;
}

const APP = [
  "import sys",
  "",
  "",
  "def greet(name):",
  '    return "Hello, " + name',
  "",
  "",
  "def main():",
  "    print(greet(sys.argv[1]))",
  "",
  "",
  'if __name__ == "__main__":',
  "    main()",
  "",
].join("\n");

const numbered = (n: number, value: (i: number) => number = (i) => i) =>
  Array.from({ length: n }, (_, k) => `value_${k + 1} = ${value(k + 1)}\n`).join("");

export function editScenarios(suite: () => Suite): void {
  /** A workbench on a new workspace folder, with the extension active. */
  async function open(name: string, model: string, files: Record<string, string>, settings?: Record<string, unknown>) {
    const { root, codeServer, browser } = suite();
    const folder = makeWorkspace(root, name, model, files, settings);
    // Wide enough that a half of the editor area shows a diff side by side (VS Code shows it
    // inline below 900 pixels).
    const workbench = await Workbench.open(browser, codeServer.url, folder, { width: 1920, height: 1000 });
    await workbench.runCommand("View: Close Primary Side Bar");
    return { folder, workbench };
  }

  async function ask(workbench: Workbench, prompt: string): Promise<void> {
    await workbench.runCommand("Heddle: Ask agent");
    await workbench.answerInputBox("Ask Heddle", prompt);
  }

  /** The review diff, open and focused, with no quick pick over it. */
  async function review(workbench: Workbench, title: string) {
    const diff = workbench.diffEditor();
    await workbench.tab(`Review: ${title}`).waitFor();
    await diff.original.locator(".view-line").first().waitFor();
    // The hunks' labels come once the extension has placed the cursor on the first one.
    await until(async () => (await workbench.decorationTexts(diff.modified)).length > 0, "the hunks' labels");
    assert.equal(await workbench.quickInput.isVisible(), false, "no quick pick over the review");
    return diff;
  }

  it("an unsaved buffer and an agent edit elsewhere: the buffer holds both; saveAfterEdit decides the disk", async (t) => {
    const mark = milestones(t);
    const { folder, workbench } = await open("sync", "vscode-sync", { "app.py": APP });
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      const editor = await workbench.openFile("app.py", "def greet");
      await editor.locator(".view-line", { hasText: "import sys" }).click();
      await page.keyboard.press("Home");
      await page.keyboard.type("# my unsaved note\n");
      await workbench.dirtyTab(/app\.py/).waitFor();
      mark("buffer dirty");

      await ask(workbench, "Use an f-string in greet");
      // The scripted model only edits if its Read returned the unsaved line.
      const diff = await review(workbench, "Edit app.py");
      mark("review open");
      await diff.modified.locator(".view-line", { hasText: 'f"Hello, {name}"' }).waitFor();
      await page.keyboard.press("Control+Enter");
      const panel = workbench.panel();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      mark("turn completed");
      await diff.editor.waitFor({ state: "detached" });

      const buffer = await workbench.lines(editor);
      assert.equal(buffer[0], "# my unsaved note");
      assert.equal(buffer[5], '    return f"Hello, {name}"');
      assert.equal(readFileSync(join(folder, "app.py"), "utf8"), APP, "ifClean: a file with unsaved changes is not saved");
      assert.equal(await workbench.dirtyTab(/app\.py/).count(), 1, "still unsaved");

      // With `always`, the next edit is saved: the whole buffer, the user's line too.
      // (The model changes too, so the panel shows when VS Code has read the file.)
      writeFileSync(join(folder, ".vscode", "settings.json"), JSON.stringify({ "heddle.model": "vscode-sync-always", "heddle.saveAfterEdit": "always" }));
      await panel.locator("section.notice", { hasText: "Settings changed" }).waitFor();
      await ask(workbench, "Default to world");
      await review(workbench, "Edit app.py");
      await page.keyboard.press("Control+Enter");
      await panel.locator('section.end[data-reason="completed"]').nth(1).waitFor();
      const expected = `# my unsaved note\n${APP}`.replace('"Hello, " + name', 'f"Hello, {name}"').replace("sys.argv[1])", 'sys.argv[1] if len(sys.argv) > 1 else "world")');
      await waitForFile(join(folder, "app.py"), expected);
      await workbench.dirtyTab(/app\.py/).waitFor({ state: "detached" });
      mark("saved after the second edit");
    });
  });

  it("three hunks, one rejected with a message: the file holds the others; the model hears the decision", async (t) => {
    const mark = milestones(t);
    const { folder, workbench } = await open("hunks", "vscode-hunks", { "values.py": numbered(30) });
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      const file = await workbench.openFile("values.py", "value_1 = 1");
      const fileBox = await file.boundingBox();
      await ask(workbench, "Scale the values");
      const diff = await review(workbench, "Edit values.py (3 changes)");
      mark("review open");
      // In the group that showed the file (the panel took the other half): not squeezed beside it.
      const box = await diff.editor.boundingBox();
      const width = page.viewportSize()!.width;
      assert.ok(box && fileBox && Math.abs(box.x - fileBox.x) < 60 && box.width > width * 0.4, JSON.stringify({ box, fileBox, width }));
      const hint = diff.modified.locator(".view-line", { hasText: "value_14 = 140" });
      await hint.waitFor();

      // Keep the first (the cursor starts there and moves on), reject the second, with a message.
      await page.keyboard.press("Control+Alt+y");
      await page.keyboard.press("Control+Alt+n");
      await workbench.answerInputBox("Reject change 2 of 3", "keep 14 as it is");
      await diff.modified.locator(".view-line", { hasText: /^value_14\s=\s14(?!0)/ }).waitFor();
      const labels = ["change 1/3: will be applied", "change 2/3: rejected: “keep 14 as it is”", "change 3/3: will be applied"];
      await until(async () => JSON.stringify(await workbench.decorationTexts(diff.modified)) === JSON.stringify(labels), "the labels after the rejection");
      // (and the diff redrawn: two lines removed on the left, not three)
      await until(async () => (await diff.original.locator(".view-overlays .line-delete").count()) === 2, "the diff without the rejected change");
      await screenshot(workbench, "vscode-review", true);

      await page.locator(".editor-actions [aria-label^='Accept the edit']").first().click();
      const panel = workbench.panel();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      mark("turn completed");
      // The model's answer came only because its request carried the rejection and its message.
      assert.equal(await panel.locator("section.assistant").last().innerText(), "Scaled 2 and 26; 14 stays as it is.");
      const tool = panel.locator("section.tool").last();
      assert.equal(await tool.locator(".decision").innerText(), "Permission: allowed once, 2 of 3 changes kept (change 2 rejected: “keep 14 as it is”)");
      await waitForFile(join(folder, "values.py"), numbered(30, (i) => (i === 2 || i === 26 ? i * 10 : i)));
      await diff.editor.waitFor({ state: "detached" });
    });
  });

  it("the user edits the proposal: exactly that text is written, and the model sees it", async (t) => {
    const { folder, workbench } = await open("own-text", "vscode-own-text", { "notes.py": 'title = "draft"\nbody = ""\n' });
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      await ask(workbench, "Finish the title");
      const diff = await review(workbench, "Edit notes.py");
      await diff.modified.locator(".view-line", { hasText: 'title = "final"' }).click();
      await page.keyboard.press("End");
      await page.keyboard.type("  # checked by me");
      await page.keyboard.press("Control+Enter");
      const panel = workbench.panel();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      assert.equal(await panel.locator("section.assistant").last().innerText(), "I see you added a comment to the title.");
      assert.equal(readFileSync(join(folder, "notes.py"), "utf8"), 'title = "final"  # checked by me\nbody = ""\n');
    });
  });

  it("the file changes while the review is open: nothing is written, and the tool result says why", async (t) => {
    const conf = "debug = False\n" + numbered(12) + "retries = 1\n";
    const { folder, workbench } = await open("meanwhile", "vscode-changed-meanwhile", { "conf.py": conf });
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      const editor = await workbench.openFile("conf.py", "debug = False");
      await ask(workbench, "Tune the settings");
      await review(workbench, "Edit conf.py (2 changes)");
      // Back to the file (its tab is beside the review's), to type a line in it.
      await workbench.tab(/^conf\.py/).click();
      await editor.locator(".view-line", { hasText: "value_6 = 6" }).click();
      await page.keyboard.press("End");
      await page.keyboard.type("\n# typed during the review");
      await workbench.tab("Review: Edit conf.py").click();
      const diff = workbench.diffEditor();
      await diff.modified.locator(".view-line", { hasText: "debug = True" }).click();
      await page.keyboard.press("Control+Alt+n");
      await workbench.answerInputBox("Reject change 1 of 2", "");
      await diff.modified.locator(".view-line", { hasText: "debug = False" }).waitFor();
      await diff.modified.locator(".view-line", { hasText: "retries = 3" }).click();
      await page.keyboard.press("Control+Enter");
      const panel = workbench.panel();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      assert.equal(await panel.locator('section.tool[data-status="error"]').count(), 1);
      assert.equal(await panel.locator("section.assistant").last().innerText(), "The file changed while you reviewed it; I will read it again.");
      await workbench.tab(/^conf\.py/).click();
      const buffer = await workbench.lines(editor);
      assert.deepEqual(buffer.slice(0, 8), ["debug = False", ...numbered(6).trimEnd().split("\n"), "# typed during the review"]);
      assert.equal(buffer.includes("retries = 3"), false);
      assert.equal(readFileSync(join(folder, "conf.py"), "utf8"), conf);
    });
  });

  it("an edit breaks an open JSON file: the model hears of the error VS Code reports", async (t) => {
    const mark = milestones(t);
    const data = '{\n  "a": 1,\n  "b": 2\n}\n';
    const { folder, workbench } = await open("diagnostics", "vscode-diagnostics", { "data.json": data });
    // Bounds the wait for VS Code's JSON validation well above what a loaded machine needs
    // (the daemon stops waiting as soon as the diagnostics are fresh and settled).
    mkdirSync(join(folder, ".heddle"));
    writeFileSync(join(folder, ".heddle", "settings.toml"), "[editor]\ndiagnostics_wait = 20\n");
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      await workbench.openFile("data.json", '"b": 2');
      await ask(workbench, "Add c to the data");
      await review(workbench, "Edit data.json");
      await page.keyboard.press("Control+Enter");
      const panel = workbench.panel();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      mark("turn completed");
      // The model only answers if the Edit's result told it of the error on line 3.
      assert.equal(await panel.locator("section.assistant").last().innerText(), "VS Code says data.json lost a comma; I will put it back.");
    });
  });
}

/** Resolves once `test` holds, checked every 100 ms; fails after `ms`. */
async function until(test: () => Promise<boolean>, what: string, ms = 10000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The file's text, once it is `expected` (the editor saves in its own time); bounded. */
async function waitForFile(path: string, expected: string, ms = 10000): Promise<void> {
  const end = Date.now() + ms;
  let text = "";
  while (Date.now() < end) {
    text = readFileSync(path, "utf8");
    if (text === expected) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(text, expected);
}
