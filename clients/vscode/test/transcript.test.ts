/** The panel's reducer: pure, no daemon. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Event, TurnEventParams } from "../src/protocol.generated";
import { describeExit, EMPTY, OUTPUT_KEEP, percent, reduce, type Action, type Transcript } from "../src/transcript";

let seq = 0;
const event = (e: Event | Record<string, unknown>): Action =>
  ({ type: "event", params: { sessionId: "s", turnId: "t", seq: seq++, event: e } as TurnEventParams });

function run(actions: Action[]): Transcript {
  return actions.reduce((t, a) => reduce(t, a).transcript, EMPTY);
}

describe("transcript", () => {
  it("joins text deltas into one markdown block until something else happens", () => {
    const t = run([
      { type: "prompt", prompt: "hi", context: [{ path: "/w/a.py", range: { startLine: 2, endLine: 4 } }] },
      event({ kind: "turnStarted", prompt: "hi", model: "m" }),
      event({ kind: "textDelta", text: "Hel" }),
      event({ kind: "textDelta", text: "lo **there**" }),
      event({ kind: "toolCallStarted", toolCallId: "c1", tool: "Read" }),
      event({ kind: "textDelta", text: "More." }),
    ]);
    assert.deepEqual(t.blocks.map((b) => b.kind), ["user", "assistant", "tool", "assistant"]);
    assert.deepEqual(t.blocks[0], { kind: "user", id: "b1", text: "hi", context: ["a.py:2-4"] });
    assert.equal(t.blocks[1].kind === "assistant" && t.blocks[1].text, "Hello **there**");
  });

  it("says what the user kept of a reviewed edit", () => {
    const decision = (answered: Record<string, unknown>) => {
      const t = run([event({ kind: "toolCallStarted", toolCallId: "r", tool: "MultiEdit" }), event({ kind: "permissionAnswered", toolCallId: "r", ...answered })]);
      const block = t.blocks[0];
      return block.kind === "tool" ? block.decision : undefined;
    };
    const hunks = [
      { index: 0, decision: "accept" },
      { index: 1, decision: "reject", message: "keep 14 as it is" },
      { index: 2, decision: "reject" },
    ];
    assert.equal(decision({ decision: "allowOnce", hunks }), "allowed once, 1 of 3 changes kept (change 2 rejected: “keep 14 as it is”; change 3 rejected)");
    assert.equal(decision({ decision: "allowOnce", edited: true }), "allowed once, with your own text");
    assert.equal(decision({ decision: "allowOnce", hunks: [{ index: 0, decision: "accept" }] }), "allowed once");
  });

  it("follows a tool call from start through permission to its result", () => {
    const t = run([
      event({ kind: "toolCallStarted", toolCallId: "c1", tool: "Edit" }),
      event({ kind: "toolCallInput", toolCallId: "c1", tool: "Edit", input: {}, title: "Edit a.py" }),
      event({ kind: "permissionAsked", toolCallId: "c1", title: "Edit a.py", preview: { kind: "diff", path: "/w/a.py", diff: "-x\n+y\n" } }),
    ]);
    assert.deepEqual(t.blocks, [
      { kind: "tool", id: "tool-c1", tool: "Edit", title: "Edit a.py", state: "asking", preview: "-x\n+y\n" },
    ]);
    const after = [
      event({ kind: "permissionAnswered", toolCallId: "c1", decision: "allowAlways", rule: "Edit(a.py)" }),
      event({ kind: "toolCallFinished", toolCallId: "c1", tool: "Edit", status: "ok", summary: "1 replacement", diff: "-x\n+y\n" }),
    ].reduce((acc, a) => reduce(acc, a).transcript, t);
    assert.deepEqual(after.blocks[0], {
      kind: "tool", id: "tool-c1", tool: "Edit", title: "Edit a.py", state: "ok", preview: "-x\n+y\n",
      decision: "always allowed (Edit(a.py))", summary: "1 replacement", diff: "-x\n+y\n",
    });
  });

  it("keeps one plan per turn, replaced as it changes", () => {
    const t = run([
      event({ kind: "todo", todos: [{ content: "Read", status: "inProgress", activeForm: "Reading" }, { content: "Fix", status: "pending" }] }),
      event({ kind: "textDelta", text: "working" }),
      event({ kind: "todo", todos: [{ content: "Read", status: "completed" }, { content: "Fix", status: "inProgress" }] }),
    ]);
    assert.deepEqual(t.blocks.map((b) => b.kind), ["plan", "assistant"]);
    assert.deepEqual(t.blocks[0], {
      kind: "plan", id: "plan-t", items: [{ content: "Read", status: "completed" }, { content: "Fix", status: "inProgress" }],
    });
  });

  it("puts a sub-agent's tool calls inside its Task call", () => {
    const sub = (e: Record<string, unknown>) => event({ kind: "agent", toolCallId: "task1", agent: "find the config", event: e as unknown as Event });
    const t = run([
      event({ kind: "toolCallInput", toolCallId: "task1", tool: "Task", input: {}, title: "Task: find the config" }),
      sub({ kind: "toolCallStarted", toolCallId: "r1", tool: "Read" }),
      sub({ kind: "textDelta", text: "not shown" }),
      sub({ kind: "toolCallInput", toolCallId: "r1", tool: "Read", input: {}, title: "Read app.toml" }),
      sub({ kind: "toolCallFinished", toolCallId: "r1", tool: "Read", status: "ok", summary: "12 lines" }),
      sub({ kind: "toolCallStarted", toolCallId: "g1", tool: "Grep" }),
    ]);
    assert.equal(t.blocks.length, 1);
    const task = t.blocks[0];
    assert.ok(task.kind === "tool");
    assert.equal(task.agent, "find the config");
    assert.deepEqual(task.children, [
      { id: "r1", title: "Read app.toml", state: "ok", summary: "12 lines" },
      { id: "g1", title: "Grep", state: "pending" },
    ]);
  });

  it("a command's call keeps the title its input gave while permission is asked", () => {
    const t = run([
      event({ kind: "toolCallInput", toolCallId: "c3", tool: "Bash", input: { command: "make", description: "Build it" }, title: "Build it" }),
      event({ kind: "permissionAsked", toolCallId: "c3", title: "Run: make", preview: { kind: "command", command: "make", cwd: "/w" } }),
    ]);
    assert.deepEqual(t.blocks, [{ kind: "tool", id: "tool-c3", tool: "Bash", title: "Build it", state: "asking", command: "make" }]);
  });

  it("keeps the message the user gave with a rejection", () => {
    const t = run([
      event({ kind: "permissionAsked", toolCallId: "c2", title: "Run: make", preview: { kind: "command", command: "make", cwd: "/w" } }),
      { type: "answered", toolCallId: "c2", message: "Not now" },
      event({ kind: "permissionAnswered", toolCallId: "c2", decision: "reject" }),
    ]);
    assert.deepEqual(t.blocks, [{
      kind: "tool", id: "tool-c2", tool: "tool", title: "Run: make", state: "rejected", command: "make", note: "Not now", decision: "rejected",
    }]);
  });

  it("reports only the changed block; usage changes nothing, turnEnded draws the end", () => {
    const t = run([event({ kind: "textDelta", text: "a" })]);
    const update = reduce(t, event({ kind: "textDelta", text: "b" }));
    assert.deepEqual(update.changed, [t.blocks[0].id]);
    assert.deepEqual(reduce(update.transcript, event({ kind: "usage", usage: {} })).changed, []);
    const ended = reduce(update.transcript, event({ kind: "turnEnded", reason: "completed", usage: {} }));
    assert.deepEqual(ended.changed, ["end-t"]);
    assert.equal(ended.transcript.blocks.length, 2);
  });

  it("shows retries, errors, fallbacks, compaction, summaries, the end of a turn, and kinds it does not know", () => {
    const t = run([
      event({ kind: "retry", attempt: 1, maxAttempts: 3, delayMs: 1500, error: { code: "overloaded", message: "Overloaded" } }),
      event({ kind: "error", error: { code: "internal", message: "boom" } }),
      event({ kind: "modelFallback", fromModel: "big", toModel: "small", error: { code: "overloaded", message: "Overloaded" } }),
      event({ kind: "compaction", layer: "auto", tokensBefore: 120400, tokensAfter: 30000, summary: "" }),
      event({ kind: "toolSummary", toolCallIds: ["c1"], summary: "Read the config" }),
      event({ kind: "loopDetected", toolCallId: "c9", tool: "Grep", count: 4, cycle: ["Grep"], description: "the agent made the same Grep call 4 times in a row with the same result" }),
      event({ kind: "somethingNew" }),
      event({ kind: "somethingElse", message: "Said plainly" }),
      { type: "result", result: { turnId: "t", reason: "cancelled", usage: { modelCalls: 2, inputTokens: 100, cacheReadInputTokens: 20, outputTokens: 7 }, text: "", transitions: [], cancelPhase: "tools" } },
    ]);
    assert.deepEqual(t.blocks.map((b) => (b.kind === "notice" ? [b.level, b.text] : [b.kind])), [
      ["warning", "Overloaded — retrying in 1.5s (attempt 1 of 3)"],
      ["error", "boom"],
      ["warning", "big failed (Overloaded); switched to small"],
      ["info", "Compacted the conversation (auto), 120.4k → 30k tokens"],
      ["info", "Read the config"],
      ["warning", "Repeating itself: the agent made the same Grep call 4 times in a row with the same result"],
      ["info", "Something new"],
      ["info", "Said plainly"],
      ["end"],
    ]);
    assert.deepEqual(t.blocks[8], {
      kind: "end", id: "end-t", reason: "cancelled", detail: "while tools ran", usage: "2 model calls · 120 tokens in (17% from cache), 7 out",
    });
  });

  it("a command's live output grows under its call, and a failed command keeps its exit status", () => {
    const live = run([
      event({ kind: "toolCallStarted", toolCallId: "b1", tool: "Bash" }),
      event({ kind: "toolCallInput", toolCallId: "b1", tool: "Bash", input: {}, title: "Run: make" }),
      event({ kind: "toolOutput", toolCallId: "b1", stream: "combined", text: "step 1\n" }),
      event({ kind: "toolOutput", toolCallId: "b1", stream: "combined", text: "step 2\n", elided: 300 }),
      event({ kind: "toolOutput", toolCallId: "b1", stream: "stdout", text: "checked\n", hook: "PostToolUse" }),
      event({ kind: "toolOutput", toolCallId: "", stream: "stdout", text: "a Stop hook\n", hook: "Stop" }),
    ]);
    assert.equal(live.blocks.length, 1);
    const running = live.blocks[0];
    assert.equal(running.kind === "tool" && running.state, "running");
    assert.equal(running.kind === "tool" && running.output, "step 1\n\n… 300 bytes left out …\nstep 2\n[PostToolUse] checked\n");
    assert.equal(running.kind === "tool" && running.elided, 300);
    const failed = reduce(live, event({ kind: "toolCallFinished", toolCallId: "b1", tool: "Bash", status: "error", summary: "exit 2", exitCode: 2 })).transcript.blocks[0];
    assert.equal(failed.kind === "tool" && failed.state, "error");
    assert.equal(failed.kind === "tool" && failed.exitCode, 2);
    assert.equal(failed.kind === "tool" && describeExit(failed), "exit 2");
    const killed = reduce(live, event({ kind: "toolCallFinished", toolCallId: "b1", tool: "Bash", status: "error", summary: "killed by SIGKILL", signal: "SIGKILL" })).transcript.blocks[0];
    assert.equal(killed.kind === "tool" && describeExit(killed), "killed by SIGKILL");
  });

  it("keeps only the newest output of a noisy command, counting the rest", () => {
    const chunk = "x".repeat(40 * 1024);
    const t = run([
      event({ kind: "toolOutput", toolCallId: "n", stream: "combined", text: chunk }),
      event({ kind: "toolOutput", toolCallId: "n", stream: "combined", text: chunk + "END" }),
    ]);
    const block = t.blocks[0];
    assert.equal(block.kind === "tool" && block.output?.length, OUTPUT_KEEP);
    assert.equal(block.kind === "tool" && block.output?.endsWith("END"), true);
    assert.equal(block.kind === "tool" && block.elided, 2 * chunk.length + 3 - OUTPUT_KEEP);
  });

  it("the turn's end comes from turnEnded, and its result does not draw it twice", () => {
    const usage = { modelCalls: 1, inputTokens: 10, cacheReadInputTokens: 80, cacheCreationInputTokens: 10, outputTokens: 5 };
    const t = run([
      { type: "prompt", prompt: "hi", context: [] },
      event({ kind: "turnStarted", prompt: "hi", model: "m" }),
      event({ kind: "turnEnded", reason: "completed", usage }),
      { type: "result", result: { turnId: "t", reason: "completed", usage, text: "", transitions: [] } },
    ]);
    assert.deepEqual(t.blocks.map((b) => b.kind), ["user", "end"]);
    assert.equal(t.blocks[1].kind === "end" && t.blocks[1].usage, "1 model call · 100 tokens in (80% from cache, 10 written to it), 5 out");
  });

  it("a replayed history brings its prompts and ends", () => {
    const replay = (e: Record<string, unknown>, turnId: string): Action =>
      ({ type: "event", replay: true, params: { sessionId: "s", turnId, seq: seq++, event: e } as unknown as TurnEventParams });
    const t = run([
      replay({ kind: "turnStarted", prompt: "first", model: "m" }, "t1"),
      replay({ kind: "textDelta", text: "One." }, "t1"),
      replay({ kind: "turnEnded", reason: "completed", usage: {} }, "t1"),
      replay({ kind: "turnStarted", prompt: "second", model: "m" }, "t2"),
      replay({ kind: "turnEnded", reason: "cancelled", usage: {}, error: { code: "interrupted", message: "Heddle stopped during this turn" } }, "t2"),
    ]);
    assert.deepEqual(t.blocks.map((b) => [b.kind, b.kind === "user" ? b.text : b.kind === "end" ? b.reason : ""]), [
      ["user", "first"], ["assistant", ""], ["end", "completed"], ["user", "second"], ["end", "cancelled"],
    ]);
  });

  it("a message queued while the answer streams does not cut the answer in two", () => {
    const t = run([
      event({ kind: "modelCall", index: 0, model: "m" }),
      event({ kind: "textDelta", text: "Let me " }),
      { type: "prompt", prompt: "and this", context: [], ifBusy: "queue" },
      event({ kind: "textDelta", text: "think." }),
    ]);
    assert.deepEqual(t.blocks.map((b) => [b.kind, b.kind === "user" ? b.ifBusy : b.kind === "assistant" ? b.text : ""]), [
      ["assistant", "Let me think."], ["user", "queue"],
    ]);
  });

  it("shows the cache share without claiming 0% or 100% for a share that is neither", () => {
    assert.equal(percent(1, 1000), "<1%");
    assert.equal(percent(999, 1000), ">99%");
    assert.equal(percent(500, 1000), "50%");
  });

  it("a tombstone takes back the text and tool calls of the model call being redone", () => {
    const t = run([
      event({ kind: "modelCall", index: 0, model: "m" }),
      event({ kind: "textDelta", text: "kept" }),
      event({ kind: "toolCallStarted", toolCallId: "c1", tool: "Read" }),
      event({ kind: "toolCallFinished", toolCallId: "c1", tool: "Read", status: "ok", summary: "1 line" }),
      event({ kind: "modelCall", index: 1, model: "m" }),
      event({ kind: "thinkingDelta", text: "hmm" }),
      event({ kind: "textDelta", text: "cut off mid-" }),
      event({ kind: "toolCallStarted", toolCallId: "c2", tool: "Bash" }),
      event({ kind: "toolCallFinished", toolCallId: "c2", tool: "Bash", status: "cancelled", summary: "discarded: the response broke off" }),
    ]);
    const update = reduce(t, event({ kind: "tombstone", index: 1, reason: "output limit raised" }));
    assert.deepEqual(update.removed, [t.blocks[2].id, t.blocks[3].id, t.blocks[4].id]);
    assert.deepEqual(update.transcript.blocks.map((b) => b.kind), ["assistant", "tool", "notice"]);
    const redone = reduce(update.transcript, event({ kind: "textDelta", text: "whole answer" })).transcript;
    assert.equal(redone.blocks.at(-1)?.kind === "assistant" && redone.blocks.at(-1)?.id !== t.blocks[3].id, true);
  });

  it("clear drops every block", () => {
    const update = reduce(run([event({ kind: "textDelta", text: "a" })]), { type: "clear" });
    assert.equal(update.cleared, true);
    assert.deepEqual(update.transcript.blocks, []);
  });
});
