/**
 * The permission prompt. An edit whose preview carries the texts is reviewed in the diff editor
 * (./reviewEditor.ts). Anything else gets a native quick pick naming the tool and what it will
 * do, offering the daemon's choices (Allow once / Always allow with its rule / Reject with an
 * optional message) and, for an edit too large to review, "Show diff" to open the change in
 * VS Code's diff view. A plan (PresentPlan in plan mode) is shown rendered in the panel (its
 * tool block) and opened as a Markdown preview beside the editor; the quick pick then offers
 * the daemon's choices — approve and go on in `default` or `acceptEdits`, or keep planning with
 * feedback for the agent.
 */

import * as vscode from "vscode";
import type { PermissionOption, PermissionRequestParams, PermissionRequestResult } from "../protocol.generated";
import { applyUnifiedDiff } from "../unifiedDiff";
import { DiffDocuments, readFileOrEmpty } from "../editor";
import { reviewable } from "../review";
import type { ReviewEditor } from "./reviewEditor";

type Decision = PermissionOption["decision"];

interface Choice extends vscode.QuickPickItem {
  decision?: Decision;
  rule?: string;
  mode?: PermissionOption["mode"];
  showDiff?: true;
}

const ICONS: Record<Decision, string> = { allowOnce: "$(check)", allowAlways: "$(check-all)", reject: "$(close)" };
const DEFAULT_OPTIONS: PermissionOption[] = [
  { decision: "allowOnce", label: "Allow once" },
  { decision: "allowAlways", label: "Always allow" },
  { decision: "reject", label: "Reject" },
];

export async function askPermission(
  request: PermissionRequestParams,
  signal: AbortSignal,
  diffs: DiffDocuments,
  reviews: ReviewEditor,
): Promise<PermissionRequestResult> {
  const preview = request.preview;
  if (preview?.kind === "diff" && typeof preview.before === "string" && typeof preview.after === "string" && preview.hunks) {
    const hunks = reviewable(preview.before, preview.after, preview.hunks);
    if (hunks) return reviews.ask(request, hunks, signal);
  }
  if (preview?.kind === "plan") return askPlan(request, preview.plan, signal, diffs);
  const choice = await pick(request, signal, diffs);
  void diffs.forget(request.toolCallId);
  if (!choice?.decision || signal.aborted) return { decision: "reject" };
  if (request.loop) return { decision: choice.decision };
  if (choice.decision === "reject") {
    const message = await askMessage("Reject", "Tell Heddle why, or what to do instead (optional). Press Enter to reject.", signal);
    return message ? { decision: "reject", message } : { decision: "reject" };
  }
  return choice.rule ? { decision: choice.decision, rule: choice.rule } : { decision: choice.decision };
}

/** A plan: shown as a Markdown preview beside the editor while the quick pick asks. */
async function askPlan(request: PermissionRequestParams, plan: string, signal: AbortSignal, diffs: DiffDocuments): Promise<PermissionRequestResult> {
  await diffs.showMarkdown(request.toolCallId, plan);
  const choice = await pick(request, signal, diffs);
  void diffs.forget(request.toolCallId);
  if (!choice?.decision || signal.aborted) return { decision: "reject" };
  if (choice.decision === "reject") {
    const message = await askMessage("Keep planning", "What should change in the plan? (optional) Press Enter to send.", signal);
    return message ? { decision: "reject", message } : { decision: "reject" };
  }
  return choice.mode ? { decision: choice.decision, mode: choice.mode } : { decision: choice.decision };
}

function choices(request: PermissionRequestParams): Choice[] {
  const options = request.options.length ? request.options : DEFAULT_OPTIONS;
  const items: Choice[] = options.map((option) => ({
    label: `${ICONS[option.decision] ?? ""} ${option.label}`.trim(),
    description: describeOption(option, request.loop === true),
    decision: option.decision,
    rule: option.rule ?? undefined,
    mode: option.mode ?? undefined,
  }));
  if (request.preview?.kind === "diff") {
    items.push({ label: "", kind: vscode.QuickPickItemKind.Separator });
    items.push({ label: "$(diff) Show diff", description: "open the change side by side", showDiff: true });
  }
  return items;
}

function describeOption(option: PermissionOption, loop = false): string | undefined {
  if (loop) return option.decision === "reject" ? "end the turn here" : "the agent goes on, told to change approach";
  if (option.mode) return `the session goes on in mode ${option.mode}`;
  if (option.decision === "reject" && option.label.startsWith("Keep planning")) return "you can say what should change next";
  if (option.rule && !option.label.includes(option.rule)) return `rule: ${option.rule}`;
  if (option.rule) return "for the rest of this session";
  if (option.decision === "reject") return "you can say why next";
  return undefined;
}

function placeholder(request: PermissionRequestParams): string {
  const preview = request.preview;
  if (preview?.kind === "command") return `${request.title} — in ${preview.cwd}`;
  return request.title;
}

function pick(request: PermissionRequestParams, signal: AbortSignal, diffs: DiffDocuments): Promise<Choice | undefined> {
  return new Promise((resolve) => {
    const quickPick = vscode.window.createQuickPick<Choice>();
    // The repeat guard's question (`loop`) is about the turn, not about running the call.
    quickPick.title = request.loop ? "Heddle is repeating itself"
      : request.preview?.kind === "plan" ? "Heddle has a plan: approve it?" : `Heddle wants to use ${request.tool}`;
    quickPick.placeholder = placeholder(request);
    quickPick.items = choices(request);
    quickPick.ignoreFocusOut = true;
    quickPick.matchOnDescription = true;
    let chosen: Choice | undefined;
    const finish = () => {
      listeners.forEach((listener) => listener.dispose());
      signal.removeEventListener("abort", onAbort);
      quickPick.dispose();
      resolve(chosen);
    };
    const onAbort = () => quickPick.hide();
    const listeners = [
      quickPick.onDidAccept(() => {
        const item = quickPick.selectedItems[0];
        if (!item) return;
        if (item.showDiff) {
          void showDiff(request, diffs);
          quickPick.activeItems = [quickPick.items[0]];
          return;
        }
        chosen = item;
        quickPick.hide();
      }),
      quickPick.onDidHide(finish),
    ];
    signal.addEventListener("abort", onAbort);
    if (signal.aborted) {
      finish();
      return;
    }
    quickPick.show();
  });
}

async function showDiff(request: PermissionRequestParams, diffs: DiffDocuments): Promise<void> {
  const preview = request.preview;
  if (preview?.kind !== "diff") return;
  const before = preview.before ?? (await readFileOrEmpty(preview.path));
  const after = preview.after ?? applyUnifiedDiff(before, preview.diff);
  if (after === undefined) {
    // The file changed since the diff was made; show the diff text itself.
    await diffs.show(request.toolCallId, `${preview.path}.diff`, "", preview.diff, request.title);
    return;
  }
  await diffs.show(request.toolCallId, preview.path, before, after, `${request.title} (proposed)`);
}

/** An optional message, asked in an input box; undefined when left empty or dismissed. */
export function askMessage(title: string, prompt: string, signal: AbortSignal): Promise<string | undefined> {
  return new Promise((resolve) => {
    const input = vscode.window.createInputBox();
    input.title = title;
    input.prompt = prompt;
    input.ignoreFocusOut = true;
    let message: string | undefined;
    const onAbort = () => input.hide();
    const listeners = [
      input.onDidAccept(() => {
        message = input.value.trim() || undefined;
        input.hide();
      }),
      input.onDidHide(() => {
        listeners.forEach((listener) => listener.dispose());
        signal.removeEventListener("abort", onAbort);
        input.dispose();
        resolve(message);
      }),
    ];
    if (signal.aborted) {
      listeners.forEach((listener) => listener.dispose());
      input.dispose();
      resolve(undefined);
      return;
    }
    signal.addEventListener("abort", onAbort);
    input.show();
  });
}
