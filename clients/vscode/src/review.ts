/**
 * The review of a proposed edit, hunk by hunk, free of any editor API. The proposal is a
 * document the user sees (and may edit) beside the current text: rejecting a hunk puts the old
 * lines back in it, accepting one puts the new lines in again, so it always shows what will be
 * written. What each hunk's lines hold is the decision; the answer is the decisions when the
 * document is exactly `before` with them applied, else the document's text (`finalText`).
 *
 * Lines are counted as the daemon counts them (Python's `splitlines`), which matches the
 * editor's lines only for texts whose line breaks are all `\n` or all `\r\n`: `reviewable`
 * says whether a preview can be reviewed per hunk at all.
 */

import type { DiffHunk, HunkAnswer, PermissionRequestResult } from "./protocol.generated";

export type HunkState = "accept" | "reject" | "edited";

export interface Hunk {
  index: number;
  /** The lines the hunk replaces (with their line breaks), context included. */
  oldLines: string[];
  newLines: string[];
  /** 0-based line in `before` where `oldLines` start. */
  oldAt: number;
  /** `lines 4-9` of the file before the edit, as the daemon tells the model. */
  label: string;
  /** Offset of the first changed line from the start of the hunk, on the new side. */
  firstChange: number;
}

/** A line range [start, end) in the proposal document, 0-based. */
export interface LineSpan {
  start: number;
  end: number;
}

/** A change to the document, as the editor reports it (positions before the change). */
export interface TextChange {
  startLine: number;
  startCharacter: number;
  endLine: number;
  endCharacter: number;
  text: string;
}

/** Line breaks the daemon counts (Python's str.splitlines) that the editor does not. */
const OTHER_BREAKS = /[\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;

/** Lines with their line breaks, split where Python's `splitlines(keepends=True)` would for \n and \r\n texts. */
export function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

function eolOf(text: string): "\n" | "\r\n" | "mixed" | "none" {
  const breaks = text.match(/\r\n|\r|\n/g) ?? [];
  if (breaks.length === 0) return "none";
  return breaks.every((b) => b === "\n") ? "\n" : breaks.every((b) => b === "\r\n") ? "\r\n" : "mixed";
}

/**
 * Whether before → after can be reviewed per hunk in the editor: the editor's lines are the
 * daemon's lines, its text is the text (one kind of line break, the same on both sides; no BOM,
 * which the editor would hide), and the hunks fit the texts.
 */
export function reviewable(before: string, after: string, hunks: DiffHunk[]): Hunk[] | undefined {
  if (hunks.length === 0) return undefined;
  for (const text of [before, after]) {
    if (OTHER_BREAKS.test(text) || text.startsWith("\ufeff") || eolOf(text) === "mixed") return undefined;
  }
  const eols = new Set([eolOf(before), eolOf(after)].filter((eol) => eol !== "none"));
  if (eols.size > 1) return undefined;
  const beforeLines = splitLines(before);
  const afterLines = splitLines(after);
  const parsed = hunks.map((hunk, position) => {
    // In a unified diff a range of 0 lines names the line before it (`-5,0` inserts after line 5).
    const oldAt = hunk.oldLines === 0 ? hunk.oldStart : hunk.oldStart - 1;
    const newAt = hunk.newLines === 0 ? hunk.newStart : hunk.newStart - 1;
    const oldLines = beforeLines.slice(oldAt, oldAt + hunk.oldLines);
    const newLines = afterLines.slice(newAt, newAt + hunk.newLines);
    let firstChange = 0;
    while (firstChange < Math.min(oldLines.length, newLines.length) - 1 && oldLines[firstChange] === newLines[firstChange]) firstChange++;
    const last = hunk.oldLines === 0 ? hunk.oldStart : hunk.oldStart + hunk.oldLines - 1;
    const label = hunk.oldLines <= 1 ? `line ${Math.max(hunk.oldStart, 1)}` : `lines ${hunk.oldStart}-${last}`;
    const fits = position === hunk.index && oldLines.length === hunk.oldLines && newLines.length === hunk.newLines;
    return { index: fits ? hunk.index : -1, oldLines, newLines, oldAt, label, firstChange };
  });
  if (parsed.some((hunk) => hunk.index < 0)) return undefined;
  const review = new Review(before, parsed);
  return review.compose(parsed.map(() => "accept")) === after ? parsed : undefined;
}

export class Review {
  /** Where each hunk is in the proposal document, which starts as the proposal itself. */
  readonly spans: LineSpan[];
  private readonly beforeLines: string[];

  constructor(before: string, readonly hunks: Hunk[]) {
    this.beforeLines = splitLines(before);
    let shift = 0;
    this.spans = hunks.map((hunk) => {
      const start = hunk.oldAt + shift;
      shift += hunk.newLines.length - hunk.oldLines.length;
      return { start, end: start + hunk.newLines.length };
    });
  }

  /** `before` with the hunks decided so applied (accepted) or left out (rejected). */
  compose(decisions: ReadonlyArray<"accept" | "reject">): string {
    const out: string[] = [];
    let cursor = 0;
    this.hunks.forEach((hunk, i) => {
      out.push(...this.beforeLines.slice(cursor, hunk.oldAt));
      out.push(...(decisions[i] === "reject" ? hunk.oldLines : hunk.newLines));
      cursor = hunk.oldAt + hunk.oldLines.length;
    });
    out.push(...this.beforeLines.slice(cursor));
    return out.join("");
  }

  /** Follow a change of the document: spans after it move, a span it touches grows or shrinks with it. */
  track(change: TextChange): void {
    const newlines = change.text.split("\n").length - 1;
    // A change of whole lines (from column 0 to column 0, its text whole lines) touches only
    // those; any other touches the lines it starts and ends on.
    const whole = change.startCharacter === 0 && change.endCharacter === 0 && (change.text === "" || change.text.endsWith("\n"));
    const from = change.startLine;
    const to = whole ? change.endLine : change.endLine + 1;
    const delta = (whole ? newlines : newlines + 1) - (to - from);
    for (const span of this.spans) {
      if (span.end <= from) continue;
      if (span.start >= to) {
        span.start += delta;
        span.end += delta;
      } else {
        span.start = Math.min(span.start, from);
        span.end = Math.max(span.end, to) + delta;
      }
    }
  }

  /** What each hunk's lines in `text` (the document) hold now. */
  states(text: string): HunkState[] {
    const lines = splitLines(text);
    return this.hunks.map((hunk, i) => {
      const held = lines.slice(this.spans[i].start, this.spans[i].end);
      if (same(held, hunk.newLines)) return "accept";
      if (same(held, hunk.oldLines)) return "reject";
      return "edited";
    });
  }

  /** The hunk at or nearest after `line` of the document (the last one past the end). */
  hunkAt(line: number): number {
    const i = this.spans.findIndex((span) => line < Math.max(span.end, span.start + 1));
    return i < 0 ? this.spans.length - 1 : i;
  }

  /** The lines to put in place of hunk `i` in the document to accept or reject it. */
  replacement(i: number, decision: "accept" | "reject"): { span: LineSpan; text: string } {
    const hunk = this.hunks[i];
    return { span: { ...this.spans[i] }, text: (decision === "accept" ? hunk.newLines : hunk.oldLines).join("") };
  }

  /**
   * The answer to the permission request for accepting the document `text`: nothing more when
   * it is the proposal; per-hunk decisions (with the messages given for rejected hunks) when
   * it is `before` with some hunks left out; else the text itself.
   */
  answer(
    base: Pick<PermissionRequestResult, "decision" | "rule">,
    text: string,
    after: string,
    messages: ReadonlyMap<number, string>,
  ): PermissionRequestResult {
    const result: PermissionRequestResult = base.rule ? { decision: base.decision, rule: base.rule } : { decision: base.decision };
    if (text === after) return result;
    const states = this.states(text);
    const decisions = states.map((state) => (state === "reject" ? "reject" : "accept"));
    if (states.every((state) => state !== "edited") && this.compose(decisions) === text) {
      result.hunks = decisions.map((decision, index): HunkAnswer => {
        const message = decision === "reject" ? messages.get(index) : undefined;
        return message ? { index, decision, message } : { index, decision };
      });
      return result;
    }
    result.finalText = text;
    return result;
  }
}

function same(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((line, i) => line === b[i]);
}
