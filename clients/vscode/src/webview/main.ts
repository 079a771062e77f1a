/**
 * The panel's script, running inside the webview: applies each action to its transcript with the
 * shared reducer and repaints only the blocks that changed. Assistant text is markdown, rendered
 * at most once per animation frame while it streams.
 */

import MarkdownIt from "markdown-it";
import type { FromWebview, ToWebview } from "../ui/panel";
import { startsMention } from "../mentions";
import { escapeHtml, highlight } from "./highlight";
import { describeExit, describeReason, EMPTY, reduce, type Block, type Transcript } from "../transcript";

declare function acquireVsCodeApi(): { postMessage(message: FromWebview): void };

const vscode = acquireVsCodeApi();
// Raw HTML from the model is shown as text, never run; links stay plain.
// Code blocks are highlighted (escaped first, so the model's text is never markup).
const markdown = new MarkdownIt({
  html: false,
  linkify: true,
  breaks: false,
  highlight: (code, language) => `<pre class="code"><code class="language-${escapeHtml(language || "text")}">${highlight(code, language)}</code></pre>`,
});

const root = document.getElementById("transcript") as HTMLElement;
const state = document.getElementById("state") as HTMLElement;
const sessionLabel = document.getElementById("session") as HTMLElement;
const cancelButton = document.getElementById("cancel") as HTMLButtonElement;
const newSessionButton = document.getElementById("new-session") as HTMLButtonElement;
const sessionsButton = document.getElementById("sessions") as HTMLButtonElement;
const modeButton = document.getElementById("mode") as HTMLButtonElement;
const modelButton = document.getElementById("model") as HTMLButtonElement;
const composer = document.getElementById("composer") as HTMLFormElement;
const promptInput = document.getElementById("prompt") as HTMLTextAreaElement;
const sendButton = document.getElementById("send") as HTMLButtonElement;
const queueButton = document.getElementById("queue") as HTMLButtonElement;
const steerButton = document.getElementById("steer") as HTMLButtonElement;
const IDLE_PLACEHOLDER = promptInput.placeholder;
const BUSY_PLACEHOLDER = "Heddle is working: Enter queues this for its next step, Ctrl+Enter steers (stops it and answers this)";

let transcript: Transcript = EMPTY;
let running = false;
const dirty = new Set<string>();
let frame: number | undefined;
/** Output sections the user opened or closed: their choice outlives repaints. */
const outputToggled = new Map<string, boolean>();

window.addEventListener("message", (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  switch (message.type) {
    case "reset":
      transcript = message.transcript;
      root.replaceChildren();
      transcript.blocks.forEach((block) => dirty.add(block.id));
      setRunning(message.running);
      break;
    case "action": {
      const update = reduce(transcript, message.action);
      transcript = update.transcript;
      if (update.cleared) root.replaceChildren();
      update.removed?.forEach((id) => {
        document.getElementById(id)?.remove();
        dirty.delete(id);
      });
      update.changed.forEach((id) => dirty.add(id));
      break;
    }
    case "running":
      setRunning(message.running);
      break;
    case "mention":
      insertMention(message.path);
      return;
    case "session":
      sessionLabel.textContent = message.session ? `${message.session.model} · ${message.session.permissionMode}` : "";
      modeButton.textContent = message.session ? `Mode: ${message.session.permissionMode}` : "Mode";
      modelButton.textContent = message.session ? `Model: ${message.session.model}` : "Model";
      sessionLabel.title = message.session ? `Session ${message.session.sessionId} in ${message.session.workspace}` : "";
      sessionLabel.dataset.sessionId = message.session?.sessionId ?? message.pending ?? "";
      if (!message.session && message.pending) {
        sessionLabel.textContent = "daemon stopped · the next request continues this session";
      }
      break;
  }
  schedule();
});

cancelButton.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
newSessionButton.addEventListener("click", () => vscode.postMessage({ type: "newSession" }));
sessionsButton.addEventListener("click", () => vscode.postMessage({ type: "sessions" }));
modeButton.addEventListener("click", () => vscode.postMessage({ type: "setMode" }));
modelButton.addEventListener("click", () => vscode.postMessage({ type: "setModel" }));
composer.addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
promptInput.addEventListener("input", (event) => {
  const typed = (event as InputEvent).data;
  if (typed === "@" && startsMention(promptInput.value, promptInput.selectionStart)) vscode.postMessage({ type: "mention" });
});

/** Put the picked path after the `@` at the caret, and a space after it. */
function insertMention(path: string | undefined): void {
  promptInput.focus();
  if (!path) return;
  const caret = promptInput.selectionStart;
  const text = promptInput.value;
  const insert = `${path} `;
  promptInput.value = text.slice(0, caret) + insert + text.slice(caret);
  promptInput.selectionStart = promptInput.selectionEnd = caret + insert.length;
}

queueButton.addEventListener("click", () => send("queue"));
steerButton.addEventListener("click", () => send("interrupt"));
promptInput.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    send(running && (event.ctrlKey || event.metaKey) ? "interrupt" : undefined);
  }
});

/** Send the prompt; while a turn runs it is queued unless `ifBusy` says to steer. */
function send(ifBusy?: "queue" | "interrupt"): void {
  const prompt = promptInput.value.trim();
  if (!prompt) return;
  promptInput.value = "";
  vscode.postMessage(running ? { type: "ask", prompt, ifBusy: ifBusy ?? "queue" } : { type: "ask", prompt });
}

function setRunning(value: boolean): void {
  running = value;
  document.body.dataset.running = String(value);
  cancelButton.hidden = !value;
  modeButton.disabled = value;
  modelButton.disabled = value;
  sendButton.hidden = value;
  queueButton.hidden = !value;
  steerButton.hidden = !value;
  promptInput.placeholder = value ? BUSY_PLACEHOLDER : IDLE_PLACEHOLDER;
  // #state is a live region: screen readers hear when a turn starts and ends, not every delta.
  state.textContent = value ? "Working…" : "Idle";
}

function schedule(): void {
  if (frame === undefined) frame = requestAnimationFrame(paint);
}

function paint(): void {
  frame = undefined;
  const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  for (const block of transcript.blocks) {
    if (!dirty.has(block.id)) continue;
    const fresh = render(block);
    const existing = document.getElementById(block.id);
    if (existing) existing.replaceWith(fresh);
    else root.appendChild(fresh);
  }
  dirty.clear();
  if (atBottom) window.scrollTo(0, document.body.scrollHeight);
}

function element(tag: string, className?: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function render(block: Block): HTMLElement {
  const node = element("section", `block ${block.kind}`);
  node.id = block.id;
  node.dataset.kind = block.kind;
  switch (block.kind) {
    case "user": {
      node.appendChild(element("div", "text", block.text));
      if (block.context.length) node.appendChild(element("div", "context", `with ${block.context.join(", ")}`));
      if (block.ifBusy) {
        node.dataset.ifBusy = block.ifBusy;
        node.appendChild(element("div", "context", block.ifBusy === "queue" ? "queued: the agent takes it in at its next step" : "steering: the running turn was stopped for this"));
      }
      break;
    }
    case "assistant": {
      const body = element("div", "markdown");
      body.innerHTML = markdown.render(block.text);
      node.appendChild(body);
      break;
    }
    case "thinking": {
      const details = element("details");
      details.appendChild(element("summary", undefined, "Thinking"));
      details.appendChild(element("div", "text", block.text));
      node.appendChild(details);
      break;
    }
    case "tool": {
      node.dataset.status = block.state;
      const header = element("div", "tool-header");
      const exit = describeExit(block);
      const badge = block.state === "error" && exit ? `${STATUS_WORDS.error} · ${exit}` : STATUS_WORDS[block.state];
      header.appendChild(element("span", `status status-${block.state}`, badge));
      header.appendChild(element("span", "title", block.title));
      if (block.summary && block.summary !== block.state && block.summary !== exit) header.appendChild(element("span", "summary", block.summary));
      node.appendChild(header);
      if (block.decision || block.note) {
        const note = block.note ? ` — “${block.note}”` : "";
        node.appendChild(element("div", "decision", `Permission: ${block.decision ?? "answered"}${note}`));
      }
      if (block.children?.length) {
        const list = element("ul", "children");
        if (block.agent) list.setAttribute("aria-label", block.agent);
        for (const child of block.children) {
          const item = element("li", `child status-${child.state}`);
          item.dataset.status = child.state;
          item.appendChild(element("span", "mark", CHILD_MARKS[child.state] ?? "•"));
          item.appendChild(element("span", "title", child.title));
          if (child.summary && child.summary !== child.state) item.appendChild(element("span", "summary", child.summary));
          list.appendChild(item);
        }
        node.appendChild(list);
      }
      if (block.command) node.appendChild(element("pre", "command", `$ ${block.command}`));
      if (block.plan) {
        const plan = element("div", "markdown tool-plan");
        plan.innerHTML = markdown.render(block.plan);
        node.appendChild(plan);
      }
      if (block.output !== undefined) node.appendChild(renderOutput(block));
      const diff = block.diff ?? block.preview;
      if (diff) node.appendChild(renderDiff(diff));
      break;
    }
    case "plan": {
      node.appendChild(element("div", "plan-title", "Plan"));
      const list = element("ul");
      for (const item of block.items) {
        const entry = element("li", `todo ${item.status}`);
        entry.dataset.status = item.status;
        entry.appendChild(element("span", "mark", TODO_MARKS[item.status] ?? "☐"));
        entry.appendChild(element("span", "text", item.status === "inProgress" ? item.activeForm || item.content : item.content));
        list.appendChild(entry);
      }
      node.appendChild(list);
      break;
    }
    case "notice":
      node.dataset.level = block.level;
      node.appendChild(element("div", "text", block.text));
      if (block.detail) node.appendChild(element("pre", "detail", block.detail));
      break;
    case "end":
      node.dataset.reason = block.reason;
      node.appendChild(element("span", "text", block.detail ? `${describeReason(block.reason)} — ${block.detail}` : describeReason(block.reason)));
      if (block.usage) node.appendChild(element("span", "usage", ` · ${block.usage}`));
      break;
  }
  return node;
}

const STATUS_WORDS: Record<string, string> = {
  pending: "…",
  asking: "Waiting for you",
  running: "Running",
  ok: "Done",
  error: "Failed",
  rejected: "Rejected",
  cancelled: "Cancelled",
};

const CHILD_MARKS: Record<string, string> = {
  pending: "…", asking: "?", running: "⋯", ok: "✓", error: "✗", rejected: "⊘", cancelled: "⊘",
};

const TODO_MARKS: Record<string, string> = { pending: "☐", inProgress: "◐", completed: "☑" };

/**
 * A command's output, collapsible: open while it runs and when it failed, closed once it
 * succeeded, unless the user chose otherwise. It follows the tail while it grows.
 */
function renderOutput(block: Extract<Block, { kind: "tool" }>): HTMLElement {
  const details = element("details", "output") as HTMLDetailsElement;
  const lines = block.output ? block.output.replace(/\n$/, "").split("\n").length : 0;
  const running = block.state === "running" || block.state === "pending" || block.state === "asking";
  const words = running ? `Output (${lines} line${lines === 1 ? "" : "s"} so far)` : `Output (${lines} line${lines === 1 ? "" : "s"})`;
  const summary = element("summary", undefined, block.elided ? `${words}, ${block.elided} earlier bytes not shown` : words);
  details.appendChild(summary);
  const pre = element("pre", "output-text", block.output || "(none)");
  details.appendChild(pre);
  details.open = outputToggled.get(block.id) ?? (running || block.state === "error");
  // A click on the summary, not `toggle`, which setting `open` above fires too.
  summary.addEventListener("click", () => outputToggled.set(block.id, !details.open));
  requestAnimationFrame(() => {
    pre.scrollTop = pre.scrollHeight;
  });
  return details;
}

function renderDiff(diff: string): HTMLElement {
  const pre = element("pre", "diff");
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    const kind = line.startsWith("+++") || line.startsWith("---") ? "file"
      : line.startsWith("@@") ? "hunk"
      : line.startsWith("+") ? "add"
      : line.startsWith("-") ? "del"
      : "ctx";
    pre.appendChild(element("span", `line ${kind}`, line));
  }
  return pre;
}

vscode.postMessage({ type: "ready" });
