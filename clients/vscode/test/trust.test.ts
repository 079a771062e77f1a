/**
 * Trusting a workspace's project settings (src/trust.ts, and what src/session.ts does with the
 * daemon's warning) against the real daemon and the scripted model server: a session that
 * ignores the project's allow rule, `workspace/trust` with the hash it reported, and the next
 * session applying the rule.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { Methods, type SessionNewResult } from "../src/protocol.generated";
import { Conversation } from "../src/session";
import { KnownSettings, review, SettingsChangedError, trust } from "../src/trust";
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
    scripted = await startScripted(["vscode-trust-before", "vscode-trust-after"].map((s) => join(SCENARIOS, `${s}.json`)));
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

    const known = new KnownSettings();
    await known.remember(session);
    const shown = await review(workspace.path, await known.get(workspace.path));
    assert.deepEqual(shown, { settingsFile, sha256: sha256(ALLOW_BASH), enables: ["allow rule Bash"] });
    const trusted = await trust(daemon.connection, workspace.path, shown.sha256);
    assert.deepEqual(trusted, { settingsFile, sha256: sha256(ALLOW_BASH), enables: ["allow rule Bash"] });

    conversation.renew();
    const second = await deadline(
      conversation.ask({ workspace: workspace.path, model: "vscode-trust-after" }, "Run it again"), 20000, "the second turn");

    assert.equal(second.reason, "completed");
    assert.equal(host.asked.length, 1, "the Bash call ran without asking");
    assert.equal(readFileSync(join(workspace.path, "ran.txt"), "utf8"), "after\n");
    assert.equal(host.sessions.length, 2);
    assert.notEqual(host.sessions[1].sessionId, session.sessionId, "renew opened a new session");
    assert.equal(host.sessions[1].untrustedSettings, undefined);
    await known.remember(host.sessions[1]);
    assert.equal(await known.get(workspace.path), undefined, "nothing is ignored any more");
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

    const shown = await review(workspace.path);
    assert.deepEqual(shown, { settingsFile: join(workspace.path, ".heddle", "settings.toml"), sha256: sha256(changed), content: changed });
    const trusted = await trust(daemon.connection, workspace.path, shown.sha256);
    assert.deepEqual(trusted.enables, ["allow rule Bash", "allow rule Edit"]);
    const reopened = await daemon.connection.sendRequest<SessionNewResult>(Methods.SessionNew, { workspace: workspace.path });
    assert.equal(reopened.untrustedSettings, undefined);
    assert.equal(host.messages.length, 1, "no warning for trusted settings");
    conversation.dispose();
  });

  it("a folder without project settings has nothing to trust", async () => {
    const empty = tempDir("heddle-trust-empty-");
    try {
      assert.deepEqual(await review(empty.path), { settingsFile: join(empty.path, ".heddle", "settings.toml") });
    } finally {
      empty.remove();
    }
  });
});
