/**
 * The panel's model: a list of blocks built from prompts, `turn/event`s and turn results by a
 * pure reducer. The extension keeps one copy (to repaint a reopened panel) and the webview runs
 * the same reducer on the same actions, repainting only the blocks an action touched.
 */

import type { AgentEventEvent, ContextItem, PermissionAnsweredEvent, TodoItem, TurnEventParams, TurnStartResult } from "./protocol.generated";

export type ToolState = "pending" | "asking" | "running" | "ok" | "error" | "rejected" | "cancelled";

/** A tool call a sub-agent made, shown inside the Task call that started the sub-agent. */
export interface ChildCall {
  id: string;
  title: string;
  state: ToolState;
  summary?: string;
}

export type Block =
  | { kind: "user"; id: string; text: string; context: string[] }
  | { kind: "assistant"; id: string; text: string; call?: string }
  | { kind: "thinking"; id: string; text: string; call?: string }
  | {
      kind: "tool";
      id: string;
      tool: string;
      title: string;
      state: ToolState;
      summary?: string;
      diff?: string;
      /** The proposed diff shown while permission is asked. */
      preview?: string;
      /** The command a shell call asks to run. */
      command?: string;
      decision?: string;
      /** What the user told the agent when rejecting. */
      note?: string;
      /** For a Task call: the sub-agent's name and the tool calls it made. */
      agent?: string;
      children?: ChildCall[];
    }
  | { kind: "plan"; id: string; items: TodoItem[] }
  | { kind: "notice"; id: string; level: "info" | "warning" | "error"; text: string }
  | { kind: "end"; id: string; reason: string; detail?: string; usage?: string };

export type Action =
  | { type: "prompt"; prompt: string; context: ContextItem[] }
  | { type: "event"; params: TurnEventParams }
  | { type: "result"; result: TurnStartResult }
  | { type: "failure"; message: string }
  | { type: "notice"; level: "info" | "warning" | "error"; text: string }
  /** The user's own answer to a permission request, for what the events do not carry. */
  | { type: "answered"; toolCallId: string; message: string }
  | { type: "clear" };

export interface Transcript {
  readonly blocks: readonly Block[];
  /** Number of actions applied; gives blocks unique ids. */
  readonly serial: number;
  /** Whether the last block streams text that the next delta continues. */
  readonly open?: "assistant" | "thinking";
  /** The model call text belongs to (`turnId:index`), so a tombstone can take it back. */
  readonly call?: string;
}

export const EMPTY: Transcript = { blocks: [], serial: 0 };

export interface Update {
  transcript: Transcript;
  /** Ids of blocks that were added or changed, in order. */
  changed: string[];
  /** Ids of blocks that were removed. */
  removed?: string[];
  /** True when every block was dropped. */
  cleared?: boolean;
}

export function reduce(t: Transcript, action: Action): Update {
  const serial = t.serial + 1;
  const id = (suffix = "") => `b${serial}${suffix}`;
  switch (action.type) {
    case "clear":
      return { transcript: { blocks: [], serial }, changed: [], cleared: true };
    case "prompt":
      return append(t, serial, {
        kind: "user",
        id: id(),
        text: action.prompt,
        context: action.context.map(describeContext),
      });
    case "failure":
      return append(t, serial, { kind: "notice", id: id(), level: "error", text: action.message });
    case "notice":
      return append(t, serial, { kind: "notice", id: id(), level: action.level, text: action.text });
    case "result":
      return append(t, serial, endBlock(id(), action.result));
    case "answered":
      return upsertTool(t, serial, action.toolCallId, { note: action.message });
    case "event":
      return reduceEvent(t, serial, action.params);
  }
}

function reduceEvent(t: Transcript, serial: number, params: TurnEventParams): Update {
  const event = params.event;
  const id = `b${serial}`;
  switch (event.kind) {
    case "textDelta":
    case "thinkingDelta": {
      const kind = event.kind === "textDelta" ? "assistant" : "thinking";
      const last = t.blocks[t.blocks.length - 1];
      if (t.open === kind && last && last.kind === kind && last.call === t.call) {
        return replace(t, serial, { ...last, text: last.text + event.text }, kind);
      }
      const block: Extract<Block, { kind: "assistant" | "thinking" }> = t.call ? { kind, id, text: event.text, call: t.call } : { kind, id, text: event.text };
      return append(t, serial, block, kind);
    }
    case "toolCallStarted":
      return upsertTool(t, serial, event.toolCallId, { tool: event.tool, title: event.tool, state: "pending" });
    case "toolCallInput":
      return upsertTool(t, serial, event.toolCallId, { tool: event.tool, title: event.title, state: "running" });
    case "permissionAsked":
      return upsertTool(t, serial, event.toolCallId, {
        title: event.title,
        state: "asking",
        preview: event.preview?.kind === "diff" ? event.preview.diff : undefined,
        command: event.preview?.kind === "command" ? event.preview.command : undefined,
      });
    case "permissionAnswered":
      return upsertTool(t, serial, event.toolCallId, {
        state: event.decision === "reject" ? "rejected" : "running",
        decision: describeDecision(event.decision, event.rule, event.reason) + describeReview(event),
      });
    case "toolCallFinished":
      return upsertTool(t, serial, event.toolCallId, {
        tool: event.tool,
        state: event.status,
        summary: event.summary,
        diff: event.diff ?? undefined,
      });
    case "retry":
      return append(t, serial, {
        kind: "notice",
        id,
        level: "warning",
        text: `${event.error.message} — retrying in ${Math.round(event.delayMs / 100) / 10}s ` +
          `(attempt ${event.attempt} of ${event.maxAttempts})`,
      });
    case "error":
      return append(t, serial, { kind: "notice", id, level: "error", text: event.error.message });
    case "turnStarted":
    case "usage":
      return { transcript: { ...t, serial }, changed: [] };
    case "modelCall":
      return { transcript: { ...t, serial, open: undefined, call: `${params.turnId}:${event.index}` }, changed: [] };
    case "tombstone":
      return tombstone(t, serial, `${params.turnId}:${event.index}`, event.reason);
    case "modelFallback":
      return append(t, serial, {
        kind: "notice", id, level: "warning",
        text: `${event.fromModel} failed (${event.error.message}); switched to ${event.toModel}`,
      });
    case "compaction":
      return append(t, serial, {
        kind: "notice", id, level: "info",
        text: `Compacted the conversation (${event.layer}), ${formatTokens(event.tokensBefore)} → ` +
          `${formatTokens(event.tokensAfter)} tokens${event.summary ? `: ${event.summary}` : ""}`,
      });
    case "toolSummary":
      return append(t, serial, { kind: "notice", id, level: "info", text: event.summary });
    case "todo":
      return upsertPlan(t, serial, `plan-${params.turnId}`, event.todos);
    case "agent":
      return reduceAgentEvent(t, serial, event);
    default: {
      const unknown = event as { kind: string; message?: unknown };
      // The end of the turn is drawn from the `turn/start` result, which carries the same facts.
      if (unknown.kind === "turnEnded") return { transcript: { ...t, serial }, changed: [] };
      // Kinds added after this client was built show as a note, never as an error.
      const text = typeof unknown.message === "string" ? unknown.message : humanize(unknown.kind);
      return append(t, serial, { kind: "notice", id, level: "info", text });
    }
  }
}

/** The agent's plan: one block per turn, replaced as the list changes. */
function upsertPlan(t: Transcript, serial: number, id: string, items: TodoItem[]): Update {
  const block: Block = { kind: "plan", id, items };
  const index = t.blocks.findIndex((b) => b.id === id);
  if (index < 0) return append(t, serial, block);
  const blocks = t.blocks.slice();
  blocks[index] = block;
  return { transcript: { ...t, blocks, serial, open: undefined }, changed: [id] };
}

/** A sub-agent's tool activity goes into the Task call's block; its other events are not shown. */
function reduceAgentEvent(t: Transcript, serial: number, event: AgentEventEvent): Update {
  const inner = event.event;
  let patch: Partial<ChildCall> & { id: string };
  switch (inner.kind) {
    case "toolCallStarted":
      patch = { id: inner.toolCallId, title: inner.tool, state: "pending" };
      break;
    case "toolCallInput":
      patch = { id: inner.toolCallId, title: inner.title, state: "running" };
      break;
    case "permissionAsked":
      patch = { id: inner.toolCallId, title: inner.title, state: "asking" };
      break;
    case "permissionAnswered":
      patch = { id: inner.toolCallId, state: inner.decision === "reject" ? "rejected" : "running" };
      break;
    case "toolCallFinished":
      patch = { id: inner.toolCallId, state: inner.status, summary: inner.summary };
      break;
    case "error":
      patch = { id: `error-${serial}`, title: inner.error.message, state: "error" };
      break;
    default:
      return { transcript: { ...t, serial }, changed: [] };
  }
  const parentId = `tool-${event.toolCallId}`;
  const parent = t.blocks.find((b): b is Extract<Block, { kind: "tool" }> => b.id === parentId && b.kind === "tool");
  const children = (parent?.children ?? []).slice();
  const index = children.findIndex((c) => c.id === patch.id);
  if (index < 0) children.push({ title: "tool", state: "pending", ...definedOnly(patch) } as ChildCall);
  else children[index] = { ...children[index], ...definedOnly(patch) };
  return upsertTool(t, serial, event.toolCallId, { agent: event.agent, children });
}

/** Take back what a model call showed: it is being redone. */
function tombstone(t: Transcript, serial: number, call: string, reason: string): Update {
  const removed = t.blocks.filter((b) => (b.kind === "assistant" || b.kind === "thinking") && b.call === call).map((b) => b.id);
  const blocks = t.blocks.filter((b) => !removed.includes(b.id));
  const notice: Block = { kind: "notice", id: `b${serial}`, level: "info", text: `Retrying the last answer: ${reason}` };
  return { transcript: { ...t, blocks: [...blocks, notice], serial, open: undefined }, changed: [notice.id], removed };
}

function formatTokens(n: number): string {
  return n >= 1000 ? `${Math.round(n / 100) / 10}k` : String(n);
}

function humanize(kind: string): string {
  const words = kind.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function upsertTool(
  t: Transcript,
  serial: number,
  toolCallId: string,
  patch: Partial<Extract<Block, { kind: "tool" }>>,
): Update {
  const id = `tool-${toolCallId}`;
  const index = t.blocks.findIndex((b) => b.id === id);
  if (index < 0) {
    const block: Block = { kind: "tool", id, tool: patch.tool ?? "tool", title: patch.title ?? patch.tool ?? "tool", state: "pending", ...definedOnly(patch) };
    return append(t, serial, block);
  }
  const current = t.blocks[index] as Extract<Block, { kind: "tool" }>;
  const blocks = t.blocks.slice();
  blocks[index] = { ...current, ...definedOnly(patch) };
  return { transcript: { ...t, blocks, serial, open: undefined }, changed: [id] };
}

function definedOnly<T extends object>(patch: T): Partial<T> {
  return Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function append(t: Transcript, serial: number, block: Block, open?: Transcript["open"]): Update {
  return { transcript: { ...t, blocks: [...t.blocks, block], serial, open }, changed: [block.id] };
}

function replace(t: Transcript, serial: number, block: Block, open?: Transcript["open"]): Update {
  const blocks = t.blocks.slice(0, -1);
  blocks.push(block);
  return { transcript: { ...t, blocks, serial, open }, changed: [block.id] };
}

function endBlock(id: string, result: TurnStartResult): Block {
  const block: Block = { kind: "end", id, reason: result.reason };
  const detail = result.error?.message ??
    (result.reason === "cancelled" && result.cancelPhase ? `while ${result.cancelPhase === "tools" ? "tools ran" : "the model was answering"}` : undefined);
  if (detail !== undefined) block.detail = detail;
  const usage = describeUsage(result.usage);
  if (usage) block.usage = usage;
  return block;
}

/** `2 model calls · 5210 tokens in, 304 out`; empty when nothing was used. */
export function describeUsage(usage: TurnStartResult["usage"]): string {
  const calls = usage.modelCalls ?? 0;
  if (!calls) return "";
  const input = (usage.inputTokens ?? 0) + (usage.cacheReadInputTokens ?? 0) + (usage.cacheCreationInputTokens ?? 0);
  return `${calls} model call${calls === 1 ? "" : "s"} · ${input} tokens in, ${usage.outputTokens ?? 0} out`;
}

export function describeContext(item: ContextItem): string {
  const name = item.path.split(/[\\/]/).pop() ?? item.path;
  return item.range ? `${name}:${item.range.startLine}-${item.range.endLine}` : name;
}

function describeDecision(decision: string, rule?: string | null, reason?: string | null): string {
  const words: Record<string, string> = { allowOnce: "allowed once", allowAlways: "always allowed", reject: "rejected" };
  let text = words[decision] ?? decision;
  if (rule) text += ` (${rule})`;
  if (reason) text += ` — ${reason}`;
  return text;
}

/** What the user kept of a reviewed edit: `, 2 of 3 changes kept (change 2 rejected: “…”)`. */
function describeReview(answer: Pick<PermissionAnsweredEvent, "hunks" | "edited">): string {
  if (answer.edited) return ", with your own text";
  const hunks = answer.hunks ?? [];
  const rejected = hunks.filter((hunk) => hunk.decision === "reject");
  if (!rejected.length) return "";
  const kept = hunks.length - rejected.length;
  const which = rejected.map((hunk) => `change ${hunk.index + 1} rejected${hunk.message ? `: “${hunk.message}”` : ""}`);
  return `, ${kept} of ${hunks.length} changes kept (${which.join("; ")})`;
}

/** Short human words for a terminal reason. */
export function describeReason(reason: string): string {
  const words: Record<string, string> = {
    completed: "Done",
    cancelled: "Cancelled",
    maxTurns: "Stopped: too many steps",
    promptTooLong: "Stopped: the conversation is too long",
    modelError: "Stopped: the model failed",
    blockingLimit: "Stopped: context limit reached",
    stopHookPrevented: "Stopped by a hook",
    hookStopped: "Stopped by a hook",
    tokenBudget: "Stopped: token budget spent",
  };
  return words[reason] ?? humanize(reason);
}
