/**
 * The editor-agnostic session logic (src/session.ts, src/transcript.ts) against the real
 * daemon and the scripted model server, over stdio through vscode-jsonrpc.
 */

import assert from "node:assert/strict";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import {
  EVENT_KINDS,
  Methods,
  PROTOCOL_VERSION,
} from "../src/protocol.generated";
import { Conversation, TurnInProgressError, type Disposable, type Rpc } from "../src/session";
import { deadline, startDaemon, startScripted, tempDir, type DaemonProcess, type Scripted } from "./support/processes";
import { allow, Recorder } from "./support/recorder";

const SCENARIOS = join(__dirname, "..", "..", "test", "scenarios");
const scenario = (name: string) => join(SCENARIOS, `${name}.json`);

/**
 * The Rpc an editor's language client is: one object that follows the daemon across a restart,
 * its handlers registered again on each new connection.
 */
class Relay implements Rpc {
  private readonly registrations: Array<(connection: Rpc) => Disposable> = [];

  constructor(private connection: Rpc) {}

  use(connection: Rpc): void {
    this.connection = connection;
    for (const register of this.registrations) register(connection);
  }

  sendRequest<R>(method: string, params: unknown): Promise<R> {
    return this.connection.sendRequest<R>(method, params);
  }

  sendNotification(method: string, params: unknown): Promise<void> | void {
    return this.connection.sendNotification(method, params);
  }

  onNotification(method: string, handler: (params: any) => void): Disposable {
    return this.register((connection) => connection.onNotification(method, handler));
  }

  onRequest(method: string, handler: Parameters<Rpc["onRequest"]>[1]): Disposable {
    return this.register((connection) => connection.onRequest(method, handler));
  }

  private register(register: (connection: Rpc) => Disposable): Disposable {
    this.registrations.push(register);
    return register(this.connection);
  }
}

describe("session logic against the real daemon", () => {
  let scripted: Scripted;
  let daemon: DaemonProcess;
  let workspace: ReturnType<typeof tempDir>;
  let state: ReturnType<typeof tempDir>;
  let daemonEnv: Record<string, string>;

  // One model server and one daemon for the file (the daemon's first model call is slow to
  // warm up); every test has its own scenario, workspace and session.
  before(async () => {
    state = tempDir("heddle-state-");
    scripted = await startScripted(
      ["vscode-edit", "vscode-two-edits", "vscode-command", "vscode-slow", "vscode-edit-cancel", "vscode-follow-up", "vscode-reset",
        "vscode-plan-task", "vscode-restart", "vscode-renew", "vscode-hello", "vscode-plan-mode"]
        .map(scenario),
    );
    daemonEnv = { ANTHROPIC_BASE_URL: scripted.url, ANTHROPIC_API_KEY: "test", XDG_STATE_HOME: state.path };
    daemon = await startDaemon(daemonEnv, state.path);
  });

  after(async () => {
    await daemon?.stop();
    await scripted?.stop();
    state?.remove();
  });

  beforeEach(() => {
    workspace = tempDir("heddle-ws-");
    writeFileSync(join(workspace.path, "hello.py"), 'print("Hello, wrold")\n');
  });

  afterEach(() => {
    workspace?.remove();
  });

  const settings = (model: string) => ({ workspace: workspace.path, model });

  it("initialize reports Heddle's protocol version, methods and event kinds", () => {
    assert.equal(daemon.server.protocolVersion, PROTOCOL_VERSION);
    assert.deepEqual([...daemon.server.methods].sort(), Object.values(Methods).sort());
    assert.deepEqual([...daemon.server.eventKinds].sort(), [...EVENT_KINDS].sort());
    assert.ok(daemon.server.tools.includes("Edit"));
  });

  it("streams a turn, asks before editing, and the edit lands on disk after Allow once", async () => {
    const host = new Recorder(allow("allowOnce"));
    const conversation = new Conversation(daemon.connection, host);
    // The scenario's first step only answers if the selection reached the model.
    const context = [{
      path: join(workspace.path, "hello.py"),
      text: 'print("Hello, wrold")',
      range: { startLine: 1, endLine: 1 },
      language: "python",
    }];
    const result = await deadline(conversation.ask(settings("vscode-edit"), "Fix the typo", context), 20000, "the turn");

    assert.equal(result.reason, "completed");
    assert.equal(result.text, "Fixed the typo in **hello.py**: it now prints `Hello, world`.");
    assert.equal(readFileSync(join(workspace.path, "hello.py"), "utf8"), 'print("Hello, world")\n');

    assert.equal(host.asked.length, 1);
    const request = host.asked[0];
    assert.equal(request.tool, "Edit");
    assert.deepEqual(request.options.map((o) => o.decision), ["allowOnce", "allowAlways", "reject"]);
    assert.ok(request.options.find((o) => o.decision === "allowAlways")?.rule, "Always allow shows its rule");
    assert.equal(request.preview?.kind, "diff");
    if (request.preview?.kind === "diff") {
      assert.equal(request.preview.path, join(workspace.path, "hello.py"));
      assert.match(request.preview.diff, /^-print\("Hello, wrold"\)$/m);
      assert.match(request.preview.diff, /^\+print\("Hello, world"\)$/m);
    }

    // Every event of the turn arrived, in order, with no gap.
    assert.deepEqual(host.events.map((e) => e.seq), host.events.map((_, i) => i));
    assert.equal(new Set(host.events.map((e) => e.turnId)).size, 1);
    assert.equal(host.events[0].event.kind, "turnStarted");
    for (const kind of ["textDelta", "toolCallStarted", "toolCallInput", "permissionAsked", "permissionAnswered", "toolCallFinished"]) {
      assert.ok(host.kinds().includes(kind), `saw ${kind}`);
    }

    // The panel's model of the same events.
    const [tool] = host.blocks("tool");
    assert.equal(tool.tool, "Edit");
    assert.equal(tool.state, "ok");
    assert.match(tool.diff ?? "", /\+print\("Hello, world"\)/);
    assert.match(tool.decision ?? "", /allowed once/);
    assert.deepEqual(host.blocks("assistant").map((b) => b.text), [
      "I'll fix the typo in the greeting.",
      "Fixed the typo in **hello.py**: it now prints `Hello, world`.",
    ]);
  });

  it("Always allow saves the rule, so the next edit of the file runs without asking", async () => {
    const host = new Recorder(allow("allowAlways"));
    const conversation = new Conversation(daemon.connection, host);
    const result = await deadline(conversation.ask(settings("vscode-two-edits"), "Fix hello.py"), 20000, "the turn");

    assert.equal(result.reason, "completed");
    assert.equal(host.asked.length, 1, "asked only for the first edit");
    assert.equal(readFileSync(join(workspace.path, "hello.py"), "utf8"), 'print(  "Hello, world")\n');
    const answers = host.events.flatMap((e) => (e.event.kind === "permissionAnswered" ? [e.event] : []));
    assert.equal(answers[0].decision, "allowAlways");
    assert.equal(answers[0].rule, host.asked[0].options.find((o) => o.decision === "allowAlways")?.rule);
    assert.deepEqual(host.blocks("tool").map((b) => b.state), ["ok", "ok"]);
  });

  it("Reject with a message: the command does not run and the model gets the message", async () => {
    const host = new Recorder(async () => ({ decision: "reject", message: "Do not write files in this folder." }));
    const conversation = new Conversation(daemon.connection, host);
    const result = await deadline(conversation.ask(settings("vscode-command"), "Run it"), 20000, "the turn");

    assert.equal(result.reason, "completed");
    assert.equal(host.asked.length, 1);
    assert.equal(host.asked[0].tool, "Bash");
    assert.equal(host.asked[0].preview?.kind, "command");
    assert.equal(existsSync(join(workspace.path, "ran.txt")), false);
    assert.equal(host.asked[0].title, "Run: echo hi > ran.txt");
    const [tool] = host.blocks("tool");
    assert.equal(tool.state, "rejected");
    assert.equal(tool.title, "Write hi to ran.txt");
    assert.match(tool.decision ?? "", /rejected/);
  });

  it("the plan and a sub-agent's tool calls reach the panel's model", async () => {
    const host = new Recorder(allow("allowOnce"));
    const conversation = new Conversation(daemon.connection, host);
    const result = await deadline(conversation.ask(settings("vscode-plan-task"), "Where is the greeting?"), 20000, "the turn");

    assert.equal(result.reason, "completed");
    assert.equal(result.text, "It is in hello.py, line 1.");
    assert.deepEqual(host.blocks("plan").map((b) => b.items.map((i) => [i.content, i.status])), [
      [["Find the greeting", "completed"], ["Report where it is", "completed"]],
    ]);
    const task = host.blocks("tool").find((b) => b.tool === "Task");
    assert.equal(task?.state, "ok");
    assert.equal(task?.agent, "find the greeting");
    assert.equal(task?.children?.length, 1);
    assert.match(task?.children?.[0].title ?? "", /Hello/);
    assert.equal(task?.children?.[0].state, "ok");
    assert.ok(!host.blocks("assistant").some((b) => b.text.includes("printed in hello.py")), "the sub-agent's text stays inside");
  });

  it("a plan in plan mode is shown, approved with the mode picked, and the session goes on in it", async () => {
    const host = new Recorder(async (request) => {
      const option = request.options.find((o) => o.mode === "acceptEdits");
      return { decision: option!.decision, mode: option!.mode! };
    });
    const conversation = new Conversation(daemon.connection, host);
    const result = await deadline(conversation.ask({ ...settings("vscode-plan-mode"), permissionMode: "plan" }, "Fix it"), 20000, "the turn");

    assert.equal(result.reason, "completed");
    assert.equal(host.asked.length, 1, "the Write after the approval ran without asking");
    assert.equal(host.asked[0].preview?.kind, "plan");
    assert.deepEqual(host.asked[0].options.map((o) => [o.decision, o.mode ?? null]), [
      ["allowOnce", "default"], ["allowOnce", "acceptEdits"], ["reject", null]]);
    const [plan] = host.blocks("tool");
    assert.equal(plan.tool, "PresentPlan");
    assert.equal(plan.plan, "# Fix the typo\n\n1. Write **notes.txt**");
    assert.ok(host.blocks("notice").some((b) => b.text === "Plan approved: mode acceptEdits from now on."));
    assert.equal(conversation.sessionInfo?.permissionMode, "acceptEdits");
    assert.equal(readFileSync(join(workspace.path, "notes.txt"), "utf8"), "fixed\n");
  });

  it("cancel ends a streaming turn promptly with reason cancelled", async () => {
    const host = new Recorder(allow("allowOnce"));
    const conversation = new Conversation(daemon.connection, host);
    const turn = conversation.ask(settings("vscode-slow"), "Take your time");
    await host.until(() => host.kinds().includes("textDelta"), "the first text delta");
    assert.equal(conversation.running, true);

    const started = Date.now();
    assert.equal(conversation.cancel(), true);
    const result = await deadline(turn, 5000, "the cancelled turn to end");
    const elapsed = Date.now() - started;

    assert.equal(result.reason, "cancelled");
    assert.equal(result.cancelPhase, "streaming");
    assert.ok(elapsed < 5000, `cancel took ${elapsed} ms`); // (prompt: the stream lasts 10 s)
    assert.equal(conversation.running, false);
    assert.equal(conversation.cancel(), false, "nothing left to cancel");
  });

  it("New session while a turn runs: it is cancelled and closed, and loads again", async () => {
    const host = new Recorder(allow("allowOnce"));
    const conversation = new Conversation(daemon.connection, host);
    const turn = conversation.ask(settings("vscode-slow"), "Take your time");
    await host.until(() => host.kinds().includes("textDelta"), "the first text delta");
    const first = conversation.sessionInfo?.sessionId as string;
    conversation.reset();
    assert.equal((await deadline(turn, 5000, "the cancelled turn to end")).reason, "cancelled");
    assert.deepEqual((await conversation.list(workspace.path)).map((s) => s.live), [false]);
    const loaded = await deadline(conversation.load(first), 20000, "the load");
    assert.equal(loaded.sessionId, first);
    assert.deepEqual((await conversation.list(workspace.path)).map((s) => [s.sessionId, s.live]), [[first, true]]);
  });

  it("cancel while the permission prompt is open closes the prompt and ends the turn", async () => {
    let promptSignal: AbortSignal | undefined;
    const host = new Recorder((_request, signal) => {
      promptSignal = signal;
      return new Promise((resolve) => signal.addEventListener("abort", () => resolve({ decision: "reject" })));
    });
    const conversation = new Conversation(daemon.connection, host);
    const turn = conversation.ask(settings("vscode-edit-cancel"), "Fix the typo");
    await host.until(() => host.asked.length === 1, "the permission request");

    conversation.cancel();
    const result = await deadline(turn, 5000, "the cancelled turn to end");

    assert.equal(result.reason, "cancelled");
    assert.equal(promptSignal?.aborted, true, "the prompt was told to close");
    assert.equal(readFileSync(join(workspace.path, "hello.py"), "utf8"), 'print("Hello, wrold")\n');
  });

  it("a follow-up continues the same session; a second ask while running is refused", async () => {
    const host = new Recorder(allow("allowOnce"));
    const conversation = new Conversation(daemon.connection, host);
    const first = conversation.ask(settings("vscode-follow-up"), "Answer me");
    await assert.rejects(conversation.ask(settings("vscode-follow-up"), "too soon"), TurnInProgressError);
    assert.equal((await deadline(first, 20000, "the first turn")).text, "The first answer.");
    const sessionId = conversation.sessionInfo?.sessionId;

    const second = await deadline(conversation.ask(settings("vscode-follow-up"), "and then?"), 20000, "the follow-up");
    assert.equal(second.reason, "completed");
    assert.equal(second.text, "The follow-up answer.");
    assert.equal(conversation.sessionInfo?.sessionId, sessionId);
    assert.equal(new Set(host.events.map((e) => e.sessionId)).size, 1);
  });

  it("renew while a turn runs: the turn reaches the host to its end, the next ask opens a new session", async () => {
    let conversation: Conversation | undefined = undefined;
    // The settings change while the permission prompt is open.
    const host = new Recorder(async (request) => {
      conversation!.renew();
      return allow("allowOnce")(request);
    });
    conversation = new Conversation(daemon.connection, host);
    const result = await deadline(conversation.ask(settings("vscode-renew"), "Run it"), 20000, "the turn");
    const first = host.sessions[0].sessionId;

    assert.equal(result.reason, "completed");
    assert.equal(readFileSync(join(workspace.path, "ran.txt"), "utf8"), "during\n");
    const [tool] = host.blocks("tool");
    assert.equal(tool.state, "ok", "the tool's end reached the host");
    assert.deepEqual(host.blocks("assistant").map((b) => b.text), ["Ran it, and the settings changed meanwhile."]);
    assert.equal(host.kinds().at(-1), "turnEnded");
    assert.equal(conversation.sessionInfo?.sessionId, first, "the session stays until the next ask");

    const second = await deadline(conversation.ask(settings("vscode-hello"), "Hello"), 20000, "the next turn");
    assert.equal(second.text, "Hello.");
    assert.equal(host.sessions.length, 2);
    assert.notEqual(host.sessions[1].sessionId, first);
    assert.equal(host.sessions[1].model, "vscode-hello");
    const live = (await conversation.list(workspace.path)).filter((s) => s.live).map((s) => s.sessionId);
    assert.deepEqual(live, [host.sessions[1].sessionId], "the session left is closed");
  });

  it("after reset the next ask opens a new session", async () => {
    const host = new Recorder(allow("allowOnce"));
    const conversation = new Conversation(daemon.connection, host);
    await deadline(conversation.ask(settings("vscode-reset"), "Answer me"), 20000, "the first turn");
    const first = conversation.sessionInfo?.sessionId;
    conversation.reset();
    assert.equal(conversation.sessionInfo, undefined);

    const second = await deadline(conversation.ask(settings("vscode-reset"), "Again"), 20000, "the second turn");
    assert.equal(second.reason, "completed");
    const next = conversation.sessionInfo as { sessionId: string } | undefined;
    assert.ok(next?.sessionId);
    assert.notEqual(next.sessionId, first);

    // The session left was closed in the daemon, and the sessions list loads it again.
    const listed = await conversation.list(workspace.path);
    assert.deepEqual(listed.map((s) => [s.sessionId, s.live]), [[next.sessionId, true], [first, false]]);
    const loaded = await deadline(conversation.load(first as string), 20000, "the load");
    assert.equal(loaded.turns, 1);
    const relisted = await conversation.list(workspace.path);
    assert.deepEqual(relisted.map((s) => [s.sessionId, s.live]), [[next.sessionId, false], [first, true]]);
    // Loading the open session again: it is closed, then loaded from its transcript, live.
    assert.equal((await deadline(conversation.load(first as string), 20000, "the reload")).turns, 1);
    assert.deepEqual((await conversation.list(workspace.path)).map((s) => s.live), [false, true]);
  });

  it("a session the restarted daemon has not loaded is loaded and continued, not replaced", async () => {
    const host = new Recorder(allow("allowOnce"));
    const relay = new Relay(daemon.connection);
    const conversation = new Conversation(relay, host);
    await deadline(conversation.ask(settings("vscode-restart"), "Answer me"), 20000, "the first turn");
    const first = conversation.sessionInfo?.sessionId;

    // The old daemon lets the session go, as its exit would (this one serves the other tests).
    await daemon.connection.sendRequest(Methods.SessionClose, { sessionId: first });
    const restarted = await startDaemon(daemonEnv, state.path);
    try {
      relay.use(restarted.connection);
      const after = await deadline(conversation.ask(settings("vscode-restart"), "Again"), 20000, "the ask after the restart");
      assert.equal(after.reason, "completed");
      assert.equal(after.text, "An answer from the restarted daemon.");
      assert.equal(conversation.sessionInfo?.sessionId, first, "the same session goes on");
      assert.equal(conversation.sessionInfo?.turns, 1, "loaded with its earlier turn");
    } finally {
      await restarted.stop();
    }
  });
});
