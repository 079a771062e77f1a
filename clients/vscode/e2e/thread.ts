/**
 * The scenarios of a thread that outlives its turns, the daemon and the window, run in the
 * suite's one code-server (askAgent.e2e.ts):
 *
 *  - a command's output shows under its call while it runs; the command fails and the call says
 *    so with its exit code; the daemon is killed, and the next question (which @-mentions a
 *    file, picked in the picker `@` opens) continues the same session, its history still shown;
 *  - queue and steer from the panel while a turn runs; the permission mode changed from the
 *    panel's header (same session); permission rules added and revoked; the window reloaded:
 *    the panel comes back with the session's history; a new session, then the sessions list
 *    opens the old one again and a follow-up continues it;
 *  - the chat as a view in the side bar: a request answered there (no editor tab opens), and
 *    after a window reload the view shows the session again and continues it.
 */

import assert from "node:assert/strict";
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import type { Browser } from "playwright-core";
import type { CodeServer } from "./support/codeServer";
import { makeWorkspace, milestones, screenshot, withPage } from "./support/scenario";
import { Workbench } from "./support/workbench";

export const THREAD_MODELS = ["vscode-live", "vscode-thread", "vscode-view"];

interface Suite {
  root: string;
  codeServer: CodeServer;
  browser: Browser;
}

/** The pid of the daemon serving `folder` (its working directory), found in /proc. */
function daemonOf(folder: string): number | undefined {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      if (!argv.includes("serve") || !argv.some((a) => a.endsWith("heddle"))) continue;
      if (readlinkSync(`/proc/${name}/cwd`) === folder) return Number(name);
    } catch {
      // Gone, or not ours to read.
    }
  }
  return undefined;
}

export function threadScenarios(suite: () => Suite): void {
  it("live output before the call ends, a failed command marked failed, a killed daemon's session continued", async (t) => {
    const { root, codeServer, browser } = suite();
    const mark = milestones(t);
    const folder = makeWorkspace(root, "live", "vscode-live", { "notes.md": "# Notes\n" });
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    await withPage(t, workbench, async () => {
      const panel = workbench.panel();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Run the build");
      await workbench.quickInput.filter({ hasText: "Heddle wants to use Bash" }).waitFor();
      await workbench.quickInputRow("Allow once").click();

      // The command's first line is in the panel while the command still waits for `go`.
      const call = panel.locator("section.tool", { hasText: "Run: echo started" });
      await call.locator("pre.output-text", { hasText: "started" }).waitFor();
      assert.equal(await call.getAttribute("data-status"), "running", "the output came before the call ended");
      assert.equal(await call.locator("details.output").getAttribute("open"), "", "open while it runs");
      mark("live output shown while the command runs");
      await screenshot(workbench, "vscode-live-output", true);
      writeFileSync(join(folder, "go"), "");

      await panel.locator('section.end[data-reason="completed"]').waitFor();
      assert.equal(await call.getAttribute("data-status"), "error");
      assert.equal(await call.locator(".status").innerText(), "Failed · exit 3");
      // Long paths (the Read's title, the answer's text) wrap: the panel does not scroll sideways.
      await panel.locator("section.assistant", { hasText: "a-rather-long-folder-name-7/build.log" }).waitFor();
      await panel.locator("section.tool .title", { hasText: "a-rather-long-folder-name-7" }).waitFor();
      const overflow = await call.evaluate((node) => ({ scroll: node.ownerDocument.documentElement.scrollWidth, width: node.ownerDocument.documentElement.clientWidth }));
      assert.ok(overflow.scroll <= overflow.width, `the panel is ${overflow.scroll} px wide in ${overflow.width}`);
      assert.match(await call.locator("pre.output-text").innerText(), /started\s+finishing/);
      assert.equal(await panel.locator("section.tool .status-ok").count(), 0, "no Done for the failed command");
      assert.match(await panel.locator("section.end .usage").innerText(), /2 model calls · \d+ tokens in.*, \d+ out/);
      await workbench.page.locator(".statusbar-item[aria-label^='Heddle context']").waitFor();
      await screenshot(workbench, "vscode-failed-command", true);
      mark("failed command shown as failed");

      // Kill the daemon; the panel says so, and the next question continues the same session.
      const session = await panel.locator("#session").getAttribute("data-session-id");
      const pid = daemonOf(folder);
      assert.ok(pid, "the daemon of this folder is running");
      process.kill(pid, "SIGKILL");
      await panel.locator("section.notice", { hasText: "The Heddle daemon stopped" }).waitFor();
      mark("daemon killed");
      // The follow-up mentions a file: `@` opens the picker, the path goes in, and the file
      // goes along as context (the model only answers if the request lists it).
      await panel.locator("#prompt").fill("What happened before? See ");
      await panel.locator("#prompt").press("End");
      await panel.locator("#prompt").pressSequentially("@");
      await workbench.quickInput.filter({ hasText: "Mention a file" }).waitFor();
      await workbench.quickInputRow("notes.md").first().click();
      await panel.locator("#prompt").press("Enter");
      await panel.locator("section.notice", { hasText: "Continuing the same session in a new daemon (1 turn so far" }).waitFor();
      await panel.locator("section.assistant", { hasText: "Still the same session: the command had failed." }).waitFor();
      assert.equal(await panel.locator("#session").getAttribute("data-session-id"), session, "the same session");
      assert.deepEqual(await panel.locator("section.user .text").allInnerTexts(), ["Run the build", "What happened before? See @notes.md"]);
      assert.equal(await panel.locator("section.user .context").last().innerText(), "with notes.md");
      assert.equal(await panel.locator('section.tool[data-status="error"]').count(), 2, "the history is still shown");
      assert.equal(await panel.locator("section.notice", { hasText: "Pending response" }).count(), 0);
      await screenshot(workbench, "vscode-resumed", true);
      mark("the same session continued");
    });
  });

  it("queue and steer, mode change, rules, window reload and the sessions list keep one session", async (t) => {
    const { root, codeServer, browser } = suite();
    const mark = milestones(t);
    const folder = makeWorkspace(root, "thread", "vscode-thread", {});
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      let panel = workbench.panel();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      await workbench.runCommand("Heddle: Ask agent");
      await workbench.answerInputBox("Ask Heddle", "Take your time");

      // Queue: Enter while the answer streams.
      await panel.locator("section.assistant", { hasText: "Let me take my time" }).waitFor();
      await panel.locator("#queue").waitFor();
      await panel.locator("#prompt").fill("Queued one");
      await panel.locator("#prompt").press("Enter");
      await panel.locator('section.user[data-if-busy="queue"]').waitFor();
      await panel.locator("section.assistant", { hasText: "Got the queued one." }).waitFor();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      mark("queued prompt answered");

      // Steer: the Steer button while the next answer streams.
      await panel.locator("#prompt").fill("Again, slowly");
      await panel.locator("#prompt").press("Enter");
      await panel.locator("section.assistant", { hasText: "Again I take my time" }).waitFor();
      await panel.locator("#prompt").fill("Steer now");
      await screenshot(workbench, "vscode-queue-steer", true);
      await panel.locator("#steer").click();
      await panel.locator("section.assistant", { hasText: "Steered." }).waitFor();
      await panel.locator('section.end[data-reason="cancelled"]').waitFor();
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      const session = await panel.locator("#session").getAttribute("data-session-id");
      assert.ok(session);
      mark("steered");

      // The mode from the panel's header: the same session, its next turns in plan mode.
      await panel.locator("#mode").click();
      await workbench.quickInputRow("plan").first().waitFor();
      await workbench.quickInputRow(/^plan/).first().click();
      await panel.locator("section.notice", { hasText: "plan (same session)" }).waitFor();
      assert.equal(await panel.locator("#mode").innerText(), "Mode: plan");
      assert.equal(await panel.locator("#session").getAttribute("data-session-id"), session);
      mark("mode changed");

      // Rules: add one for the session, find it in the list, revoke it.
      await workbench.runCommand("Heddle: Manage permission rules");
      await workbench.quickInputRow("Add a rule").click();
      await workbench.answerInputBox("Add a permission rule", "Bash(ls:*)");
      await workbench.quickInputRow(/^allow/).first().click();
      await workbench.quickInputRow(/^session/).first().click();
      await page.locator(".notification-toast", { hasText: "Added allow rule Bash(ls:*) (session)" }).waitFor();
      await workbench.runCommand("Heddle: Manage permission rules");
      const row = workbench.quickInputRow("Bash(ls:*)");
      await row.waitFor();
      await screenshot(workbench, "vscode-rules", true);
      await row.hover();
      await row.locator(".action-label[aria-label='Revoke this rule']").click();
      await page.locator(".notification-toast", { hasText: "Revoked allow Bash(ls:*) (session)" }).waitFor();
      await row.waitFor({ state: "detached" });
      await page.keyboard.press("Escape");
      mark("rule added and revoked");

      // A window reload: the panel comes back with the session's history.
      await page.reload();
      await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
      panel = workbench.panel();
      await panel.locator("section.notice", { hasText: "your next request continues it" }).waitFor({ timeout: 60000 });
      assert.equal(await panel.locator("#session").getAttribute("data-session-id"), session);
      assert.deepEqual(await panel.locator("section.user .text").allInnerTexts(), ["Take your time", "Queued one", "Again, slowly", "Steer now"]);
      await panel.locator("section.assistant", { hasText: "Steered." }).waitFor();
      assert.equal(await panel.locator("#mode").innerText(), "Mode: plan", "the mode was kept with the session");
      mark("restored after the reload");

      // A new session, then the sessions list opens the old one again; a follow-up continues it.
      await workbench.runCommand("Heddle: New session");
      await panel.locator("section.notice", { hasText: "New session." }).waitFor();
      await workbench.runCommand("Heddle: Show sessions");
      const item = workbench.quickInputRow("Take your time");
      await item.waitFor();
      assert.match(await item.innerText(), /just now|min ago/);
      await screenshot(workbench, "vscode-sessions", true);
      await item.click();
      await panel.locator("section.assistant", { hasText: "Got the queued one." }).waitFor();
      await panel.locator("#prompt").fill("Go on");
      await panel.locator("#prompt").press("Enter");
      const answer = panel.locator("section.assistant", { hasText: "Continued after the reload." });
      await answer.waitFor();
      // Its code block is highlighted, its table has borders.
      assert.deepEqual(await answer.locator("pre.code .hl-keyword").allInnerTexts(), ["def", "return"]);
      assert.equal(await answer.locator("pre.code .hl-string").first().innerText(), '"Hi {name}"');
      assert.equal(await answer.locator("td").first().evaluate((cell) => getComputedStyle(cell).borderTopStyle), "solid");
      assert.equal(await panel.locator("#session").getAttribute("data-session-id"), session);
      mark("resumed from the sessions list");
    });
  });

  it("the chat in the side bar view: answered there, restored after a reload", async (t) => {
    const { root, codeServer, browser } = suite();
    const mark = milestones(t);
    const folder = makeWorkspace(root, "view", "vscode-view", {});
    const workbench = await Workbench.open(browser, codeServer.url, folder);
    await withPage(t, workbench, async () => {
      const page = workbench.page;
      await workbench.statusItem("Heddle: ask the agent").waitFor();
      await workbench.runCommand("Heddle: Focus on Chat View");
      let view = workbench.panel();
      await view.locator("#prompt").waitFor();
      mark("chat view open");
      await view.locator("#prompt").fill("Hello?");
      await view.locator("#prompt").press("Enter");
      await view.locator("section.assistant", { hasText: "Hello from the side bar." }).waitFor();
      assert.equal(await workbench.tab("Heddle").count(), 0, "no editor tab: the view shows the chat");
      const session = await view.locator("#session").getAttribute("data-session-id");
      assert.ok(session);
      await screenshot(workbench, "vscode-chat-view", true);

      await page.reload();
      await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
      view = workbench.panel();
      await view.locator("section.assistant", { hasText: "Hello from the side bar." }).waitFor({ timeout: 60000 });
      assert.equal(await view.locator("#session").getAttribute("data-session-id"), session);
      await view.locator("#prompt").fill("And after the reload?");
      await view.locator("#prompt").press("Enter");
      await view.locator("section.assistant", { hasText: "Still here after the reload." }).waitFor();
      assert.equal(await view.locator("#session").getAttribute("data-session-id"), session);
      assert.equal(await workbench.tab("Heddle").count(), 0);
      mark("restored in the view and continued");
    });
  });
}
