/**
 * End to end in a real VS Code: code-server with the packaged VSIX, driven in headless chromium.
 * The extension starts the real daemon, which talks to the scripted model server.
 *
 *  - Ask agent from the command palette with a selection, accept the edit in its review, reject
 *    a command with a message, see the streamed markdown answer in the panel (after a line
 *    naming the workspace's AGENTS.md), and find the edit on disk.
 *  - Cancel a slowly streaming turn from the status bar, the panel and the palette: each ends
 *    promptly with `cancelled`, and follow-ups stay in one session;
 *    after "Restart daemon" the next request runs in a new session.
 *  - A project's `.heddle/settings.toml` that is not trusted: one notification lists what is
 *    ignored; "Review file" opens it, "Trust" trusts it, and the next request runs in a new
 *    session that applies its allow rule. After the file changes, "Heddle: Trust workspace
 *    settings" lists what the daemon says trusting it enables in a modal and trusts it; run
 *    again, it says the file is already trusted.
 *  - `heddle.model` changes while a turn waits for a permission answer: the panel still shows
 *    the turn to its end, and the next request runs in a new session with the new model.
 *  - Plan mode: the agent's plan shows rendered in the panel and as Markdown beside the
 *    editor while a quick pick asks; "Approve, and accept edits" switches the mode, and the
 *    edit after it runs without asking.
 *
 * Screenshots go to .e2e/artifacts; with HEDDLE_UPDATE_SCREENSHOTS=1 the docs' screenshots
 * under docs/images are refreshed too.
 */

import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser } from "playwright-core";
import { startScripted, tempDir, type Scripted } from "../test/support/processes";
import { startCodeServer, type CodeServer } from "./support/codeServer";
import { editScenarios, EDIT_MODELS } from "./editReview";
import { threadScenarios, THREAD_MODELS } from "./thread";
import { editorSettings, makeWorkspace, milestones, screenshot, withPage } from "./support/scenario";
import { launchBrowser, Workbench } from "./support/workbench";

const HERE = resolve(__dirname, "..", "..");
const SCENARIOS = join(HERE, "test", "scenarios");
const VSIX = process.env.HEDDLE_VSIX ?? join(HERE, "dist", "heddle.vsix");
/** A cancelled turn must end within this long after the click. */
const CANCEL_MS = 3000;

describe("Heddle in VS Code (code-server, headless chromium)", () => {
  let root: ReturnType<typeof tempDir>;
  let scripted: Scripted;
  let codeServer: CodeServer;
  let browser: Browser;

  before(async () => {
    root = tempDir("heddle-e2e-");
    scripted = await startScripted(["vscode-e2e", "vscode-slow", "vscode-e2e-trust", "vscode-renew", "vscode-hello", "vscode-plan-mode", ...EDIT_MODELS, ...THREAD_MODELS].map((s) => join(SCENARIOS, `${s}.json`)));
    codeServer = await startCodeServer({ root: root.path, vsix: VSIX, settings: editorSettings(root.path, scripted.url) });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await codeServer?.stop();
    await scripted?.stop();
    // HEDDLE_E2E_KEEP=1 keeps the folders, profile and logs, to look at after a failure.
    if (process.env.HEDDLE_E2E_KEEP !== "1") root?.remove();
  });

  it("Ask agent: an edit's review, a command's permission prompt (rejected), streamed answer, edit on disk", async (t) => {
    const mark = milestones(t);
    const folder = makeWorkspace(root.path, "edit", "vscode-e2e", { "hello.py": 'print("Hello, wrold")\n', "AGENTS.md": "Keep hello.py to one line.\n" });
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    mark("workbench loaded");
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      mark("extension active");

      // The selection goes along as context (the scenario only answers if the model sees it).
      const editor = await workbench.openFile("hello.py", "Hello, wrold");
      await editor.locator(".view-lines").click();
      await page.keyboard.press("Control+A");

      await workbench.runCommand("Heddle: Ask agent");
      const inputMessage = await workbench.answerInputBox("Ask Heddle", "Fix the typo in hello.py");
      assert.match(inputMessage, /Context: hello\.py:1-1/);

      // The edit opens for review in the diff editor, with no quick pick over it.
      const review = workbench.diffEditor();
      await workbench.tab("Review: Edit hello.py").waitFor();
      mark("review shown");
      await review.modified.locator(".view-line", { hasText: "Hello, world" }).waitFor();
      await review.original.locator(".view-line", { hasText: "Hello, wrold" }).waitFor();
      assert.equal(await workbench.quickInput.isVisible(), false);
      await page.locator(".editor-actions [aria-label^='Accept the edit']").first().click();
      // Answered, the proposal is stale: its diff view closes.
      await review.editor.waitFor({ state: "detached" });

      // The permission prompt for a command names it and where it runs, and offers the three choices.
      const commandPrompt = workbench.quickInput.filter({ hasText: "Heddle wants to use Bash" });
      await commandPrompt.waitFor();
      assert.match(await commandPrompt.locator("input").getAttribute("placeholder") ?? "", /python3 hello\.py > out\.txt — in /);
      const rows = await commandPrompt.locator(".quick-input-list .monaco-list-row").allInnerTexts();
      const labels = rows.map((row) => row.replace(/\s+/g, " ").trim());
      assert.ok(labels.some((l) => l.startsWith("Allow once")), `Allow once in ${JSON.stringify(labels)}`);
      assert.ok(labels.some((l) => l.startsWith("Always allow Bash(python3 hello.py > out.txt)")), `the rule in ${JSON.stringify(labels)}`);
      assert.ok(labels.some((l) => l.startsWith("Reject")), `Reject in ${JSON.stringify(labels)}`);
      await screenshot(workbench, "vscode-permission", true);

      // Reject the command, telling the agent why (the scenario only goes on if the model hears it).
      await workbench.quickInputRow("Reject").click();
      await workbench.answerInputBox("Tell Heddle why", "No need to run it");

      // The answer streams into the panel as markdown; the tool call shows its status and diff.
      const panel = workbench.panel();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      mark("turn completed");
      // The session's instruction files are named when it opens.
      assert.equal(await panel.locator('section.notice[data-level="info"]', { hasText: "Instructions in force: AGENTS.md." }).count(), 1);
      const answer = panel.locator("section.assistant").last();
      assert.equal(await answer.innerText(), "Fixed the typo in hello.py: it now prints Hello, world.");
      assert.equal(await answer.locator("strong").innerText(), "hello.py");
      assert.equal(await answer.locator("code").innerText(), "Hello, world");
      const tool = panel.locator('section.tool[data-status="ok"]');
      assert.match(await tool.locator(".tool-header").innerText(), /Edit hello\.py[\s\S]*1 replacement/);
      assert.equal(await tool.locator(".line.add").innerText(), '+print("Hello, world")');
      assert.equal(await panel.locator('section.tool[data-status="rejected"] .decision').innerText(), "Permission: rejected — “No need to run it”");
      await workbench.statusItem("Heddle: ask the agent").waitFor();

      assert.equal(readFileSync(join(folder, "hello.py"), "utf8"), 'print("Hello, world")\n');
      assert.equal(existsSync(join(folder, "out.txt")), false, "the rejected command did not run");
      await screenshot(workbench, "vscode-panel", true);
    });
  });

  it("Plan mode: the plan is shown and approved in the mode picked", async (t) => {
    const mark = milestones(t);
    const folder = makeWorkspace(root.path, "plan", "vscode-plan-mode", {});
    // A stricter mode from the project's settings applies without trust.
    mkdirSync(join(folder, ".heddle"), { recursive: true });
    writeFileSync(join(folder, ".heddle", "settings.toml"), '[permissions]\nmode = "plan"\n');
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    mark("workbench loaded");
    await withPage(t, workbench, async () => {
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Fix it");

      const prompt = workbench.quickInput.filter({ hasText: "Heddle has a plan: approve it?" });
      await prompt.waitFor();
      mark("plan asked");
      const rows = (await prompt.locator(".quick-input-list .monaco-list-row").allInnerTexts()).map((row) => row.replace(/\s+/g, " ").trim());
      assert.ok(rows[0].startsWith("Approve, and ask before each edit"), JSON.stringify(rows));
      assert.ok(rows[1].startsWith("Approve, and accept edits"), JSON.stringify(rows));
      assert.ok(rows[2].startsWith("Keep planning (with feedback)"), JSON.stringify(rows));
      // The plan is rendered in the panel and open as Markdown beside the editor.
      const panel = workbench.panel();
      const plan = panel.locator("section.tool .tool-plan");
      assert.equal(await plan.locator("h1").innerText(), "Fix the typo");
      assert.equal(await plan.locator("strong").innerText(), "notes.txt");
      await workbench.tab("Plan.md").waitFor();
      await screenshot(workbench, "vscode-plan", true);

      await workbench.quickInputRow("Approve, and accept edits").click();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      mark("turn completed");
      await panel.locator("section.notice", { hasText: "Plan approved: mode acceptEdits from now on." }).waitFor();
      await workbench.tab("Plan.md").waitFor({ state: "detached" });
      assert.equal(await workbench.quickInput.isVisible(), false, "the Write after the plan ran without asking");
      assert.equal(readFileSync(join(folder, "notes.txt"), "utf8"), "fixed\n");
    });
  });

  it("cancel from the status bar, the panel and the palette ends the turn promptly; restart", async (t) => {
    const mark = milestones(t);
    const folder = makeWorkspace(root.path, "slow", "vscode-slow", {});
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    mark("workbench loaded");
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      const panel = workbench.panel();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      mark("extension active");

      /**
       * Wait until the nth answer is streaming, cancel with `click` (after `prepare`: what
       * comes before the user's last key or click, such as opening the palette), and time the
       * end from that last key or click.
       */
      const cancelNth = async (n: number, how: string, click: () => Promise<void>, prepare?: () => Promise<() => Promise<void>>) => {
        const streaming = panel.locator("section.assistant").nth(n - 1);
        await streaming.filter({ hasText: "Let me think" }).waitFor();
        if (prepare) click = await prepare();
        assert.equal(await panel.locator("section.end").count(), n - 1, "the turn is still running");
        const started = Date.now();
        await click();
        const end = panel.locator("section.end").nth(n - 1);
        await end.waitFor({ timeout: CANCEL_MS + 2000 });
        const elapsed = Date.now() - started;
        assert.equal(await end.getAttribute("data-reason"), "cancelled");
        assert.ok(elapsed < CANCEL_MS, `cancel took ${elapsed} ms`);
        mark(`cancel from the ${how}: the turn ended ${elapsed} ms after the click`);
        assert.doesNotMatch(await streaming.innerText(), /on and on\.$/, "the answer was cut short");
        await workbench.statusItem("Heddle: ask the agent").waitFor();
        return elapsed;
      };

      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Take your time");
      await cancelNth(1, "status bar", () => workbench.statusItem("Heddle: cancel the running turn").click());
      const session = await panel.locator("#session").getAttribute("data-session-id");
      assert.ok(session, "the panel shows the session");

      // A follow-up from the panel continues the session; its Cancel button ends it.
      await panel.locator("#prompt").fill("And again, slowly");
      await panel.locator("#prompt").press("Enter");
      await cancelNth(2, "panel", () => panel.locator("#cancel").click());

      // The palette's Cancel turn (there is no progress notification: it covered the input).
      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Once more");
      assert.equal(await page.locator(".notification-toast", { hasText: "Heddle" }).count(), 0);
      await cancelNth(3, "palette", async () => undefined, () => workbench.prepareCommand("Heddle: Cancel turn"));

      assert.deepEqual(await panel.locator("section.user .text").allInnerTexts(), ["Take your time", "And again, slowly", "Once more"]);
      assert.equal(await panel.locator("#session").getAttribute("data-session-id"), session, "one session throughout");
      assert.equal(await panel.locator('section.notice:not([data-level="info"])').count(), 0, "no errors or warnings");

      // Restarting the daemon starts over in a new session.
      await workbench.runCommand("Heddle: Restart daemon");
      await panel.locator("section.notice", { hasText: "The daemon was restarted" }).waitFor();
      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "After the restart");
      await cancelNth(4, "status bar", () => workbench.statusItem("Heddle: cancel the running turn").click());
      const restarted = await panel.locator("#session").getAttribute("data-session-id");
      assert.ok(restarted && restarted !== session, "a new session after the restart");
    });
  });

  it("untrusted project settings: the notification's Review file and Trust, then the command's modal", async (t) => {
    const mark = milestones(t);
    const folder = makeWorkspace(root.path, "trust", "vscode-e2e-trust", {});
    mkdirSync(join(folder, ".heddle"));
    writeFileSync(join(folder, ".heddle", "settings.toml"), '[permissions]\nallow = ["Bash"]\n');
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    mark("workbench loaded");
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      const panel = workbench.panel();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      mark("extension active");

      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Say hello");
      const offer = page.locator(".notification-toast", { hasText: "is not trusted, so Heddle ignores what it would enable: allow rule Bash" });
      await offer.waitFor();
      mark("trust offered");
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      const session = await panel.locator("#session").getAttribute("data-session-id");
      // The daemon's own warning (it names `heddle trust -w`) came before the session's result
      // and is not shown beside the richer notification.
      assert.equal(await page.locator(".notification-toast", { hasText: "heddle trust -w" }).count(), 0);
      assert.equal(await offer.count(), 1);
      await screenshot(workbench, "vscode-trust-offer");

      // Review file opens the settings file and asks again, without that button.
      await offer.getByRole("button", { name: "Review file" }).click();
      await page.locator(".tabs-container .tab", { hasText: "settings.toml" }).waitFor();
      const again = offer.filter({ hasNotText: "Review file" });
      await again.getByRole("button", { name: "Trust", exact: true }).click();
      await page.locator(".notification-toast", { hasText: "The next request starts a new session, which applies it" }).waitFor();
      mark("trusted from the notification");

      // The next request opens a new session, where the allow rule lets Bash run unasked
      // (a permission prompt would hold the turn until the test timed out).
      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Run it");
      await panel.locator('section.end[data-reason="completed"]').nth(1).waitFor();
      mark("second turn completed");
      // (The settings file took the panel's place; the request brought it back.)
      await panel.locator("section.notice", { hasText: "Project settings trusted" }).waitFor();
      assert.equal(readFileSync(join(folder, "ran.txt"), "utf8"), "after\n");
      assert.equal(await panel.locator('section.tool[data-status="ok"]').count(), 1);
      const renewed = await panel.locator("#session").getAttribute("data-session-id");
      assert.ok(renewed && renewed !== session, "a new session after the trust");

      // A changed file needs trust again; the command shows it and asks in a modal.
      const changed = '[permissions]\nallow = ["Bash", "Edit"]\n';
      writeFileSync(join(folder, ".heddle", "settings.toml"), changed);
      await workbench.runCommand("Heddle: Trust workspace settings");
      const dialog = page.locator(".monaco-dialog-box");
      await dialog.waitFor();
      // What the daemon says trusting the file as it is now enables, not the file's text.
      assert.match(await dialog.innerText(), /Trusting it enables:\s+• allow rule Bash\s+• allow rule Edit/);
      await screenshot(workbench, "vscode-trust-modal");
      await dialog.getByRole("button", { name: "Trust", exact: true }).click();
      await page.locator(".notification-toast", { hasText: "which enables allow rule Bash; allow rule Edit" }).waitFor();
      mark("trusted from the command");

      // Asked again, the command says so instead of asking.
      await workbench.runCommand("Heddle: Trust workspace settings");
      await page.locator(".notification-toast", { hasText: "is already trusted as it is now; it enables allow rule Bash; allow rule Edit" }).waitFor();
      assert.equal(await dialog.count(), 0);
    });
  });

  it("a settings change while a turn runs: the panel shows the turn to its end; the next request opens a new session", async (t) => {
    const mark = milestones(t);
    const folder = makeWorkspace(root.path, "renew", "vscode-renew", {});
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    mark("workbench loaded");
    await withPage(t, workbench, async () => {
      const panel = workbench.panel();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      mark("extension active");

      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Run it");
      // The permission prompt holds the turn while the setting changes.
      await workbench.quickInput.filter({ hasText: "Heddle wants to use Bash" }).waitFor();
      const session = await panel.locator("#session").getAttribute("data-session-id");
      assert.ok(session, "the panel shows the session");
      writeFileSync(join(folder, ".vscode", "settings.json"), JSON.stringify({ "heddle.model": "vscode-hello" }, null, 2));
      await panel.locator("section.notice", { hasText: "Settings changed: the next request starts a new session" }).waitFor();
      mark("the settings change was seen");

      await workbench.quickInputRow("Allow once").click();
      await panel.locator('section.end[data-reason="completed"]').waitFor();
      mark("turn completed");
      assert.equal(await panel.locator('section.tool[data-status="ok"]').count(), 1, "the tool's end reached the panel");
      assert.equal(await panel.locator("section.assistant", { hasText: "Ran it, and the settings changed meanwhile." }).count(), 1);
      assert.equal(readFileSync(join(folder, "ran.txt"), "utf8"), "during\n");

      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Hello");
      await panel.locator('section.end[data-reason="completed"]').nth(1).waitFor();
      assert.equal(await panel.locator("section.assistant").last().innerText(), "Hello.");
      const renewed = await panel.locator("#session").getAttribute("data-session-id");
      assert.ok(renewed && renewed !== session, "a new session after the settings change");
      assert.match(await panel.locator("#session").innerText(), /^vscode-hello · /);
    });
  });

  editScenarios(() => ({ root: root.path, codeServer, browser }));
  threadScenarios(() => ({ root: root.path, codeServer, browser }));
});
