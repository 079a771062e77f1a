/**
 * A workspace's project settings against the real daemon and the scripted model server:
 * trusting them (src/trust.ts, and what src/session.ts does with the daemon's warning) — a
 * session that ignores the project's allow rule, the daemon's review of what trusting the file
 * enables, `workspace/trust` with the reviewed hash, and the next session applying the rule —
 * and the warnings about problems in them that a session's result brings.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { Methods, type SessionNewResult } from "../src/protocol.generated";
import { Conversation } from "../src/session";
import { review, SettingsChangedError, trust, verdict } from "../src/trust";
import { deadline, startDaemon, startScripted, tempDir, type DaemonProcess, type Scripted } from "./support/processes";
import { Recorder } from "./support/recorder";

const SCENARIOS = join(__dirname, "..", "..", "test", "scenarios");
const ALLOW_BASH = '[permissions]\nallow = ["Bash"]\n';

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

describe("trusting a workspace's settings, against the real daemon", () => {
  let scripted: Scripted;
  let daemon: DaemonProcess;
  let home: ReturnType<typeof tempDir>;
  let workspace: ReturnType<typeof tempDir>;
  let settingsFile: string;

  before(async () => {
    home = tempDir("heddle-trust-home-");
    scripted = await startScripted(["vscode-trust-before", "vscode-trust-after", "vscode-hello"].map((s) => join(SCENARIOS, `${s}.json`)));
    // The trust record lives in the user's config folder: a throwaway one.
    daemon = await startDaemon(
      {
        ANTHROPIC_BASE_URL: scripted.url,
        ANTHROPIC_API_KEY: "test",
        XDG_STATE_HOME: join(home.path, "state"),
        XDG_CONFIG_HOME: join(home.path, "config"),
      },
      home.path,
    );
  });

  after(async () => {
    await daemon?.stop();
    await scripted?.stop();
    home?.remove();
  });

  beforeEach(() => {
    workspace = tempDir("heddle-trust-ws-");
    mkdirSync(join(workspace.path, ".heddle"));
    settingsFile = join(realpathSync(workspace.path), ".heddle", "settings.toml");
    writeFileSync(settingsFile, ALLOW_BASH);
  });

  afterEach(() => {
    workspace?.remove();
  });

  it("the ignored allow rule is reported once; trusting its hash makes the next session apply it", async () => {
    const host = new Recorder(async () => ({ decision: "reject", message: "Not before the settings are trusted." }));
    const conversation = new Conversation(daemon.connection, host);
    const first = await deadline(
      conversation.ask({ workspace: workspace.path, model: "vscode-trust-before" }, "Run it"), 20000, "the first turn");

    assert.equal(first.reason, "completed");
    assert.deepEqual(host.asked.map((r) => r.tool), ["Bash"], "the project's allow rule was ignored");
    assert.equal(existsSync(join(workspace.path, "ran.txt")), false);
    const [session] = host.sessions;
    assert.deepEqual(session.untrustedSettings, { settingsFile, sha256: sha256(ALLOW_BASH), ignored: ["allow rule Bash"] });
    const [warning] = session.warnings ?? [];
    assert.match(warning, new RegExp(`heddle trust -w ${workspace.path}`));
    // The daemon's window/showMessage said the same before the result: not passed on twice.
    assert.deepEqual(host.messages, []);

    // The daemon's review says the same, before anything is trusted.
    const shown = await review(daemon.connection, workspace.path);
    assert.deepEqual(shown, { settingsFile, sha256: sha256(ALLOW_BASH), enables: ["allow rule Bash"], trusted: false });
    assert.equal(verdict(shown), "ask");
    const trusted = await trust(daemon.connection, workspace.path, shown.sha256);
    assert.deepEqual(trusted, { settingsFile, sha256: sha256(ALLOW_BASH), enables: ["allow rule Bash"] });
    const again = await review(daemon.connection, workspace.path);
    assert.deepEqual(again, { ...shown, trusted: true });
    assert.equal(verdict(again), "alreadyTrusted");

    conversation.renew();
    const second = await deadline(
      conversation.ask({ workspace: workspace.path, model: "vscode-trust-after" }, "Run it again"), 20000, "the second turn");

    assert.equal(second.reason, "completed");
    assert.equal(host.asked.length, 1, "the Bash call ran without asking");
    assert.equal(readFileSync(join(workspace.path, "ran.txt"), "utf8"), "after\n");
    assert.equal(host.sessions.length, 2);
    assert.notEqual(host.sessions[1].sessionId, session.sessionId, "renew opened a new session");
    assert.equal(host.sessions[1].untrustedSettings, undefined, "nothing is ignored any more");
  });

  it("a file changed since it was shown is not trusted; reviewed as it is now, it is", async () => {
    const host = new Recorder(async () => ({ decision: "reject" }));
    const conversation = new Conversation(daemon.connection, host);
    // A session opened by someone else: its warning reaches the host, as no session of the
    // conversation was opening.
    const opened = await daemon.connection.sendRequest<SessionNewResult>(Methods.SessionNew, { workspace: workspace.path });
    await host.until(() => host.messages.length === 1, "the daemon's warning");
    assert.deepEqual(host.messages, [{ type: 2, message: opened.warnings?.[0] }]);
    const untrusted = opened.untrustedSettings;
    assert.ok(untrusted);

    const changed = '[permissions]\nallow = ["Bash", "Edit"]\n';
    writeFileSync(settingsFile, changed);
    await assert.rejects(trust(daemon.connection, workspace.path, untrusted.sha256), SettingsChangedError);

    // Reviewed as it is now, the daemon lists what the changed file enables.
    const shown = await review(daemon.connection, workspace.path);
    assert.deepEqual(shown, { settingsFile, sha256: sha256(changed), enables: ["allow rule Bash", "allow rule Edit"], trusted: false });
    // Only the reviewed content is trusted: a change after the review is refused too.
    writeFileSync(settingsFile, `${changed}# and a comment\n`);
    await assert.rejects(trust(daemon.connection, workspace.path, shown.sha256), SettingsChangedError);
    writeFileSync(settingsFile, changed);
    const trusted = await trust(daemon.connection, workspace.path, shown.sha256);
    assert.deepEqual(trusted.enables, ["allow rule Bash", "allow rule Edit"]);
    const reopened = await daemon.connection.sendRequest<SessionNewResult>(Methods.SessionNew, { workspace: workspace.path });
    assert.equal(reopened.untrustedSettings, undefined);
    assert.equal(host.messages.length, 1, "no warning for trusted settings");
    conversation.dispose();
  });

  it("a folder without project settings has nothing to trust; one that only narrows needs no trust", async () => {
    const empty = tempDir("heddle-trust-empty-");
    try {
      const none = await review(daemon.connection, empty.path);
      assert.deepEqual(none, { settingsFile: join(realpathSync(empty.path), ".heddle", "settings.toml"), enables: [], trusted: true });
      assert.equal(verdict(none), "noFile");
    } finally {
      empty.remove();
    }
    writeFileSync(settingsFile, '[permissions]\ndeny = ["Bash(rm:*)"]\n');
    const narrowing = await review(daemon.connection, workspace.path);
    assert.equal(narrowing.trusted, true);
    assert.deepEqual(narrowing.enables, []);
    assert.equal(verdict(narrowing), "needsNoTrust");
  });

  it("problems in the settings file are shown as warnings, each once per session opened", async () => {
    const host = new Recorder(async () => ({ decision: "reject" }));
    const conversation = new Conversation(daemon.connection, host);
    writeFileSync(settingsFile, `colour = "blue"\n${ALLOW_BASH.replace('["Bash"]', '["Bash", "Bash("]')}`);

    const session = await deadline(conversation.ensureSession({ workspace: workspace.path, model: "vscode-hello" }), 20000, "session/new");

    assert.ok(session.untrustedSettings, "the allow rule still waits for trust");
    const problems = [
      { type: 2, message: `${settingsFile}: colour: unknown setting (ignored)` },
      { type: 2, message: `${settingsFile}: permissions.allow[1]: 'Bash(' is not a rule: the pattern must end with ')' (ignored)` },
    ];
    // The untrusted-settings warning is left to the trust notification.
    assert.deepEqual(host.messages, problems);
    assert.equal(session.warnings?.length, 3);

    conversation.renew();
    const second = await deadline(
      conversation.ask({ workspace: workspace.path, model: "vscode-hello" }, "Hello"), 20000, "the turn in a new session");
    assert.equal(second.reason, "completed");
    assert.equal(host.sessions.length, 2);
    assert.deepEqual(host.messages, [...problems, ...problems], "shown again for the new session");
    conversation.dispose();
  });
});
