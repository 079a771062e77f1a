/**
 * The review of an edit in VS Code's diff editor: the current text on the left (read-only), the
 * proposal on the right, which the user may edit. Each hunk can be kept or rejected (rejecting
 * puts the old lines back on the right, so the right side is always what will be written), the
 * whole change accepted or rejected, from the editor's title bar, a hunk's hover or the keyboard.
 * Closing the review rejects the edit.
 */

import * as vscode from "vscode";
import { closeTabs, columnFor, PROPOSAL_SCHEME, showsUri, type DiffDocuments, type ProposalFiles } from "../editor";
import type { DiffPreview, PermissionRequestParams, PermissionRequestResult } from "../protocol.generated";
import { Review, type Hunk } from "../review";
import { askMessage } from "./permissionPrompt";

const REVIEWING_KEY = "heddle.reviewing";

/**
 * Which review a command is for: the proposal's URI (a hover's link passes it as a string, the
 * editor's title bar as a Uri); none: the review in the active editor.
 */
type Target = string | vscode.Uri;

interface Open {
  request: PermissionRequestParams;
  after: string;
  review: Review;
  right: vscode.Uri;
  /** The messages given with rejected hunks, by index. */
  messages: Map<number, string>;
  signal: AbortSignal;
  finish(answer: PermissionRequestResult): void;
}

export class ReviewEditor implements vscode.Disposable {
  private readonly open = new Map<string, Open>();
  private readonly applied = vscode.window.createTextEditorDecorationType({
    after: { margin: "0 0 0 2em", color: new vscode.ThemeColor("editorCodeLens.foreground"), fontStyle: "italic" },
    isWholeLine: true,
  });
  private readonly rejected = vscode.window.createTextEditorDecorationType({
    after: { margin: "0 0 0 2em", color: new vscode.ThemeColor("editorCodeLens.foreground"), fontStyle: "italic" },
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor("diffEditor.unchangedRegionBackground"),
  });
  private readonly disposables: vscode.Disposable[];
  /** The review commands run one after another: each starts from what the previous one did. */
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly diffs: DiffDocuments, private readonly files: ProposalFiles) {
    this.disposables = [
      vscode.commands.registerCommand("heddle.review.accept", (uri?: Target) => this.run(() => this.accept(uri, "allowOnce"))),
      vscode.commands.registerCommand("heddle.review.acceptAlways", (uri?: Target) => this.run(() => this.accept(uri, "allowAlways"))),
      vscode.commands.registerCommand("heddle.review.reject", (uri?: Target) => this.run(() => this.reject(uri))),
      vscode.commands.registerCommand("heddle.review.keepHunk", (uri?: Target, index?: number) => this.run(() => this.decide(uri, index, "accept"))),
      vscode.commands.registerCommand("heddle.review.rejectHunk", (uri?: Target, index?: number) => this.run(() => this.decide(uri, index, "reject"))),
      vscode.workspace.onDidChangeTextDocument((event) => this.changed(event)),
      vscode.window.onDidChangeVisibleTextEditors(() => this.decorateAll()),
      vscode.window.tabGroups.onDidChangeTabs((event) => {
        if (event.closed.length) this.closedTabs();
      }),
      this.applied,
      this.rejected,
    ];
  }

  /** Review the edit `request` proposes, hunk by hunk; resolves with the answer. */
  async ask(request: PermissionRequestParams, hunks: Hunk[], signal: AbortSignal): Promise<PermissionRequestResult> {
    const preview = request.preview as DiffPreview;
    const before = preview.before ?? "";
    const after = preview.after ?? "";
    const key = request.toolCallId.replace(/[^\w-]/g, "_");
    const left = this.diffs.register(key, "current", preview.path, before);
    const right = this.files.create(key, preview.path, after);
    let finish!: (answer: PermissionRequestResult) => void;
    const answered = new Promise<PermissionRequestResult>((resolve) => {
      finish = resolve;
    });
    const open: Open = { request, after, review: new Review(before, hunks), right, messages: new Map(), signal, finish };
    this.open.set(right.toString(), open);
    const onAbort = () => finish({ decision: "reject" });
    signal.addEventListener("abort", onAbort);
    try {
      if (signal.aborted) return { decision: "reject" };
      this.setContext();
      await vscode.commands.executeCommand("vscode.diff", left, right, `Review: ${request.title}`, {
        viewColumn: columnFor(preview.path),
        preview: false,
        preserveFocus: false,
      });
      this.revealHunk(open, 0);
      this.decorateAll();
      return await answered;
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.open.delete(right.toString());
      this.setContext();
      await this.close(right);
      this.diffs.forget(key).catch(() => undefined);
    }
  }

  dispose(): void {
    for (const open of this.open.values()) open.finish({ decision: "reject" });
    this.disposables.forEach((d) => d.dispose());
  }

  private run(command: () => void | Promise<void>): Promise<void> {
    this.queue = this.queue.then(command).catch((error: unknown) => {
      void vscode.window.showErrorMessage(`Heddle: ${error instanceof Error ? error.message : String(error)}`);
    });
    return this.queue;
  }

  /** The review a command is for: the one named, else the one in the active editor. */
  private target(uri?: Target): Open | undefined {
    if (uri) return this.open.get(uri.toString());
    const active = vscode.window.activeTextEditor?.document.uri;
    if (active?.scheme === PROPOSAL_SCHEME) return this.open.get(active.toString());
    // The left side has focus: its review is the one whose right side is beside it.
    const key = active?.path.split("/")[1];
    return [...this.open.values()].find((open) => open.right.query === key) ?? (this.open.size === 1 ? [...this.open.values()][0] : undefined);
  }

  private accept(uri: Target | undefined, decision: "allowOnce" | "allowAlways"): void {
    const open = this.target(uri);
    if (!open) return;
    const document = this.document(open);
    const text = document ? document.getText() : open.after;
    const offered = open.request.options.find((option) => option.decision === decision);
    // Without an "always" choice on offer (a call that changes Heddle's own settings) it is a yes once.
    const base = decision === "allowAlways" && offered?.rule ? { decision, rule: offered.rule } : { decision: "allowOnce" as const };
    open.finish(open.review.answer(base, text, open.after, open.messages));
  }

  private async reject(uri: Target | undefined): Promise<void> {
    const open = this.target(uri);
    if (!open) return;
    const message = await askMessage("Reject the edit", "Tell Heddle why, or what to do instead (optional). Press Enter to reject.", open.signal);
    open.finish(message ? { decision: "reject", message } : { decision: "reject" });
  }

  /** Keep or reject one hunk: the one named, else the one at the cursor. */
  private async decide(uri: Target | undefined, index: number | undefined, decision: "accept" | "reject"): Promise<void> {
    const open = this.target(uri);
    if (!open) return;
    const editor = this.editor(open);
    const i = index ?? open.review.hunkAt(editor?.selection.active.line ?? 0);
    const hunk = open.review.hunks[i];
    if (!hunk) return;
    let message: string | undefined;
    if (decision === "reject") {
      const total = open.review.hunks.length;
      message = await askMessage(
        `Reject change ${i + 1} of ${total}`,
        `Tell Heddle why (optional); it hears this with the rest of your answer. Press Enter to reject ${hunk.label}.`,
        open.signal,
      );
      if (!this.open.has(open.right.toString())) return;
    }
    // The message is kept first, so the labels drawn on the document's change show it.
    if (message) open.messages.set(i, message);
    else open.messages.delete(i);
    const { span, text } = open.review.replacement(i, decision);
    const edit = new vscode.WorkspaceEdit();
    edit.replace(open.right, new vscode.Range(span.start, 0, span.end, 0), text);
    await vscode.workspace.applyEdit(edit);
    this.decorateAll();
    this.revealHunk(open, Math.min(i + 1, open.review.hunks.length - 1));
  }

  private changed(event: vscode.TextDocumentChangeEvent): void {
    const open = this.open.get(event.document.uri.toString());
    if (!open) return;
    for (const change of event.contentChanges) {
      open.review.track({
        startLine: change.range.start.line,
        startCharacter: change.range.start.character,
        endLine: change.range.end.line,
        endCharacter: change.range.end.character,
        text: change.text,
      });
    }
    this.decorateAll();
  }

  /** The user closed a review (its tab is gone from every group): that rejects the edit. */
  private closedTabs(): void {
    const tabs = vscode.window.tabGroups.all.flatMap((group) => group.tabs);
    for (const open of this.open.values()) {
      if (!tabs.some((tab) => showsUri(tab, open.right))) open.finish({ decision: "reject" });
    }
  }

  private decorateAll(): void {
    for (const open of this.open.values()) {
      const editor = this.editor(open);
      if (!editor) continue;
      const states = open.review.states(editor.document.getText());
      const total = open.review.hunks.length;
      const applied: vscode.DecorationOptions[] = [];
      const rejected: vscode.DecorationOptions[] = [];
      open.review.hunks.forEach((hunk, i) => {
        const line = Math.min(this.hunkLine(open, i), editor.document.lineCount - 1);
        const state = states[i];
        const message = open.messages.get(i);
        const what = state === "accept" ? "will be applied" : state === "reject" ? `rejected${message ? `: “${message}”` : ""}` : "edited by you";
        const args = (index: number) => encodeURIComponent(JSON.stringify([open.right.toString(), index]));
        const hover = new vscode.MarkdownString(
          `**Change ${i + 1} of ${total}** (${hunk.label}) ${what}.\n\n` +
            `[Keep it](command:heddle.review.keepHunk?${args(i)}) · [Reject it](command:heddle.review.rejectHunk?${args(i)})`,
        );
        hover.isTrusted = { enabledCommands: ["heddle.review.keepHunk", "heddle.review.rejectHunk"] };
        const option: vscode.DecorationOptions = {
          range: new vscode.Range(line, 0, line, 0),
          hoverMessage: hover,
          renderOptions: { after: { contentText: `change ${i + 1}/${total}: ${what}` } },
        };
        (state === "reject" ? rejected : applied).push(option);
      });
      editor.setDecorations(this.applied, applied);
      editor.setDecorations(this.rejected, rejected);
    }
  }

  /** The line of the document where hunk `i` changes something. */
  private hunkLine(open: Open, i: number): number {
    const span = open.review.spans[i];
    return Math.min(span.start + open.review.hunks[i].firstChange, Math.max(span.end - 1, span.start));
  }

  private revealHunk(open: Open, i: number): void {
    const editor = this.editor(open);
    if (!editor || !open.review.hunks[i]) return;
    const line = Math.min(this.hunkLine(open, i), editor.document.lineCount - 1);
    editor.selection = new vscode.Selection(line, 0, line, 0);
    editor.revealRange(new vscode.Range(line, 0, line, 0), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }

  private editor(open: Open): vscode.TextEditor | undefined {
    return vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === open.right.toString());
  }

  private document(open: Open): vscode.TextDocument | undefined {
    return vscode.workspace.textDocuments.find((d) => d.uri.toString() === open.right.toString());
  }

  /** Close the review; an edited proposal is saved first (into memory), so nothing asks to save it. */
  private async close(right: vscode.Uri): Promise<void> {
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === right.toString());
    if (document?.isDirty) await document.save().then(undefined, () => false);
    await closeTabs(right);
    this.files.delete(right);
  }

  private setContext(): void {
    void vscode.commands.executeCommand("setContext", REVIEWING_KEY, this.open.size > 0);
  }
}
