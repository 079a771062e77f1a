/**
 * The panel's model: a list of blocks built from prompts, `turn/event`s and turn results by a
 * pure reducer. The extension keeps one copy (to repaint a reopened panel) and the webview runs
 * the same reducer on the same actions, repainting only the blocks an action touched.
 */

import type {
  AgentEventEvent,
  ContextItem,
  PermissionAnsweredEvent,
  TodoItem,
  ToolCallFinishedEvent,
  ToolOutputEvent,
  TurnEndedEvent,
  TurnEventParams,
  TurnStartResult,
} from "./protocol.generated";

/** The most of a call's live output the panel keeps: the newest characters. */
export const OUTPUT_KEEP = 64 * 1024;

export type ToolState = "pending" | "asking" | "running" | "ok" | "error" | "rejected" | "cancelled";

/** A tool call a sub-agent made, shown inside the Task call that started the sub-agent. */
export interface ChildCall {
  id: string;
  title: string;
  state: ToolState;
  summary?: string;
}

export type Block =
  | { kind: "user"; id: string; text: string; context: string[]; ifBusy?: "queue" | "interrupt" }
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
      /** The plan (Markdown) a PresentPlan call asks the user to approve. */
      plan?: string;
      decision?: string;
      /** What the user told the agent when rejecting. */
      note?: string;
      /** What the command wrote so far (its newest `OUTPUT_KEEP` characters). */
      output?: string;
      /** Characters or bytes of output left out before `output` (the daemon's and ours). */
      elided?: number;
      /** A command's exit status, or the signal that ended it. */
      exitCode?: number;
      signal?: string;
      /** For a Task call: the sub-agent's name and the tool calls it made. */
      agent?: string;
      children?: ChildCall[];
      /** The model call that made it (`turnId:index`), so a tombstone can take it back. */
      call?: string;
    }
  | { kind: "plan"; id: string; items: TodoItem[] }
  /** `detail`: lines shown as they are below the text (an MCP server's last output). */
  | { kind: "notice"; id: string; level: "info" | "warning" | "error"; text: string; detail?: string }
  | { kind: "end"; id: string; reason: string; detail?: string; usage?: string };

export type Action =
  /** `ifBusy`: sent while a turn ran, to queue it or to steer (interrupt) with it. */
  | { type: "prompt"; prompt: string; context: ContextItem[]; ifBusy?: "queue" | "interrupt" | "reject" }
  /** `replay`: an event of `session/load`'s history, which brings its own prompts. */
  | { type: "event"; params: TurnEventParams; replay?: boolean }
  | { type: "result"; result: TurnStartResult }
  | { type: "failure"; message: string }
  | { type: "notice"; level: "info" | "warning" | "error"; text: string; detail?: string }
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
    case "prompt": {
      const block: Block = { kind: "user", id: id(), text: action.prompt, context: action.context.map(describeContext) };
      if (action.ifBusy === "queue" || action.ifBusy === "interrupt") {
        block.ifBusy = action.ifBusy;
        return append(t, serial, block, t.open);
      }
      return append(t, serial, block);
    }
    case "failure":
      return append(t, serial, { kind: "notice", id: id(), level: "error", text: action.message });
    case "notice": {
      const block: Block = { kind: "notice", id: id(), level: action.level, text: action.text };
      if (action.detail) block.detail = action.detail;
      return append(t, serial, block);
    }
    case "result":
      // The turn's `turnEnded` event drew the same block already, unless no event came.
      return upsertEnd(t, serial, action.result.turnId ? `end-${action.result.turnId}` : id(), action.result);
    case "answered":
      return upsertTool(t, serial, action.toolCallId, { note: action.message });
    case "event":
      return reduceEvent(t, serial, action.params, action.replay === true);
  }
}

function reduceEvent(t: Transcript, serial: number, params: TurnEventParams, replay: boolean): Update {
  const event = params.event;
  const id = `b${serial}`;
  switch (event.kind) {
    case "textDelta":
    case "thinkingDelta": {
      const kind = event.kind === "textDelta" ? "assistant" : "thinking";
      // A message queued or steering while the text streams sits below it; the text goes on.
      let index = t.blocks.length - 1;
      while (index >= 0 && isBusyPrompt(t.blocks[index])) index--;
      const last = t.blocks[index];
      if (t.open === kind && last && last.kind === kind && last.call === t.call) {
        const blocks = t.blocks.slice();
        blocks[index] = { ...last, text: last.text + event.text };
        return { transcript: { ...t, blocks, serial, open: kind }, changed: [last.id] };
      }
      const block: Extract<Block, { kind: "assistant" | "thinking" }> = t.call ? { kind, id, text: event.text, call: t.call } : { kind, id, text: event.text };
      return append(t, serial, block, kind);
    }
    case "toolCallStarted":
      return upsertTool(t, serial, event.toolCallId, { tool: event.tool, title: event.tool, state: "pending", call: t.call });
    case "toolCallInput":
      return upsertTool(t, serial, event.toolCallId, { tool: event.tool, title: event.title, state: "running" });
    case "permissionAsked":
      return upsertTool(t, serial, event.toolCallId, {
        // A command's call keeps its title (the model's description of it): the command shows below.
        title: event.preview?.kind === "command" && hasBlock(t, event.toolCallId) ? undefined : event.title,
        state: "asking",
        preview: event.preview?.kind === "diff" ? event.preview.diff : undefined,
        command: event.preview?.kind === "command" ? event.preview.command : undefined,
        plan: event.preview?.kind === "plan" ? event.preview.plan : undefined,
      });
    case "modeChanged":
      return append(t, serial, { kind: "notice", id, level: "info", text: `Plan approved: mode ${event.mode} from now on.` });
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
        ...exitOf(event),
      });
    case "toolOutput":
      return appendOutput(t, serial, event);
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
      // Live, the prompt was drawn when it was sent (with its context); a replay brings it here.
      if (!replay) return { transcript: { ...t, serial }, changed: [] };
      return append(t, serial, { kind: "user", id: `user-${params.turnId}`, text: event.prompt, context: [] });
    case "turnEnded":
      return upsertEnd(t, serial, `end-${params.turnId}`, event);
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
    case "loopDetected":
      return append(t, serial, { kind: "notice", id, level: "warning", text: `Repeating itself: ${event.description}` });
    case "todo":
      return upsertPlan(t, serial, `plan-${params.turnId}`, event.todos);
    case "agent":
      return reduceAgentEvent(t, serial, event);
    default: {
      const unknown = event as { kind: string; message?: unknown };
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

/**
 * Take back what a model call showed: it is being redone. Its tool calls go too (they all ended
 * `cancelled` before the tombstone, and the redone call makes its own).
 */
function tombstone(t: Transcript, serial: number, call: string, reason: string): Update {
  const removed = t.blocks.filter((b) => (b.kind === "assistant" || b.kind === "thinking" || b.kind === "tool") && b.call === call).map((b) => b.id);
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

function hasBlock(t: Transcript, toolCallId: string): boolean {
  return t.blocks.some((b) => b.id === `tool-${toolCallId}`);
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

function isBusyPrompt(block: Block | undefined): boolean {
  return block?.kind === "user" && block.ifBusy !== undefined;
}

/** A command's exit: `exitCode` or `signal`, when the daemon sent them. */
function exitOf(event: ToolCallFinishedEvent): { exitCode?: number; signal?: string } {
  const exit: { exitCode?: number; signal?: string } = {};
  if (typeof event.exitCode === "number") exit.exitCode = event.exitCode;
  if (event.signal) exit.signal = event.signal;
  return exit;
}

/**
 * A piece of a running command's output, added to its call. The panel keeps the newest
 * `OUTPUT_KEEP` characters and counts the rest, with what the daemon left out, in `elided`.
 * Output of a `Stop` hook (no call) is not shown.
 */
function appendOutput(t: Transcript, serial: number, event: ToolOutputEvent): Update {
  if (!event.toolCallId) return { transcript: { ...t, serial }, changed: [] };
  const current = t.blocks.find((b): b is Extract<Block, { kind: "tool" }> => b.id === `tool-${event.toolCallId}` && b.kind === "tool");
  let output = current?.output ?? "";
  let elided = current?.elided ?? 0;
  if (event.elided) {
    elided += event.elided;
    output += `\n… ${event.elided} bytes left out …\n`;
  }
  output += event.hook ? prefixLines(event.text, `[${event.hook}] `) : event.text;
  if (output.length > OUTPUT_KEEP) {
    elided += output.length - OUTPUT_KEEP;
    output = output.slice(output.length - OUTPUT_KEEP);
  }
  return upsertTool(t, serial, event.toolCallId, { output, elided: elided || undefined });
}

function prefixLines(text: string, prefix: string): string {
  return text.replace(/^(?=.)/gm, prefix);
}

function upsertEnd(t: Transcript, serial: number, id: string, facts: TurnStartResult | TurnEndedEvent): Update {
  const block = endBlock(id, facts);
  const index = t.blocks.findIndex((b) => b.id === id);
  if (index < 0) return append(t, serial, block);
  const blocks = t.blocks.slice();
  blocks[index] = block;
  return { transcript: { ...t, blocks, serial, open: undefined }, changed: [id] };
}

function endBlock(id: string, result: TurnStartResult | TurnEndedEvent): Block {
  const block: Block = { kind: "end", id, reason: result.reason };
  const detail = result.error?.message ??
    (result.reason === "cancelled" && result.cancelPhase ? `while ${result.cancelPhase === "tools" ? "tools ran" : "the model was answering"}` : undefined);
  if (detail !== undefined) block.detail = detail;
  const usage = describeUsage(result.usage);
  if (usage) block.usage = usage;
  return block;
}

/**
 * `2 model calls · 5210 tokens in (84% from cache, 310 written to it), 304 out`; the cache part
 * only when the cache was used; empty when nothing was used.
 */
export function describeUsage(usage: TurnStartResult["usage"]): string {
  const calls = usage.modelCalls ?? 0;
  if (!calls) return "";
  const read = usage.cacheReadInputTokens ?? 0;
  const written = usage.cacheCreationInputTokens ?? 0;
  const input = (usage.inputTokens ?? 0) + read + written;
  const cache = [];
  if (read) cache.push(`${percent(read, input)} from cache`);
  if (written) cache.push(`${written} written to it`);
  const cached = cache.length ? ` (${cache.join(", ")})` : "";
  return `${calls} model call${calls === 1 ? "" : "s"} · ${input} tokens in${cached}, ${usage.outputTokens ?? 0} out`;
}

/** `84%`, never `0%` or `100%` for a share that is neither. */
export function percent(part: number, whole: number): string {
  if (whole <= 0) return "0%";
  const share = Math.round((part / whole) * 100);
  return `${part > 0 && share === 0 ? "<1" : part < whole && share === 100 ? ">99" : share}%`;
}

/** `Failed · exit 2`, `Failed · killed by SIGKILL`: a command's outcome in words. */
export function describeExit(block: { exitCode?: number; signal?: string }): string | undefined {
  if (block.signal) return `killed by ${block.signal}`;
  if (block.exitCode !== undefined) return `exit ${block.exitCode}`;
  return undefined;
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
    loopDetected: "Stopped: the agent was repeating itself",
  };
  return words[reason] ?? humanize(reason);
}
