/**
 * The review of an edit hunk by hunk (src/review.ts): which previews can be reviewed, what the
 * proposal document holds as hunks are rejected, accepted again or edited, and the answer.
 * The hunks are made by Python's difflib, as the daemon makes them.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, it } from "node:test";
import type { DiffHunk } from "../src/protocol.generated";
import { Review, reviewable, splitLines, type TextChange } from "../src/review";
import { python } from "./support/processes";

/** The hunks of difflib's unified diff of before → after (3 lines of context), as the daemon sends them. */
function hunksOf(before: string, after: string): DiffHunk[] {
  const script = [
    "import difflib, json, sys",
    "a, b = json.load(sys.stdin)",
    "print(json.dumps(list(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True), 'a', 'b'))))",
  ].join("\n");
  const lines: string[] = JSON.parse(execFileSync(python(), ["-I", "-c", script], { input: JSON.stringify([before, after]) }).toString());
  const hunks: DiffHunk[] = [];
  for (const line of lines) {
    const header = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (header) {
      hunks.push({
        index: hunks.length,
        oldStart: Number(header[1]),
        oldLines: header[2] === undefined ? 1 : Number(header[2]),
        newStart: Number(header[3]),
        newLines: header[4] === undefined ? 1 : Number(header[4]),
        diff: line,
      });
    } else if (hunks.length) {
      hunks[hunks.length - 1].diff += line;
    }
  }
  return hunks;
}

/** A document as the editor holds it: changes clamped to its end, reported to the review. */
class Doc {
  constructor(public text: string, private readonly review: Review) {}

  private offset(line: number, character: number): number {
    const lines = this.text.split("\n");
    if (line >= lines.length) return this.text.length;
    return lines.slice(0, line).reduce((n, l) => n + l.length + 1, 0) + Math.min(character, lines[line].length);
  }

  private position(offset: number): [number, number] {
    const head = this.text.slice(0, offset).split("\n");
    return [head.length - 1, head[head.length - 1].length];
  }

  replace(startLine: number, startCharacter: number, endLine: number, endCharacter: number, text: string): void {
    const from = this.offset(startLine, startCharacter);
    const to = this.offset(endLine, endCharacter);
    const [sl, sc] = this.position(from);
    const [el, ec] = this.position(to);
    const change: TextChange = { startLine: sl, startCharacter: sc, endLine: el, endCharacter: ec, text };
    this.text = this.text.slice(0, from) + text + this.text.slice(to);
    this.review.track(change);
  }

  decide(i: number, decision: "accept" | "reject"): void {
    const { span, text } = this.review.replacement(i, decision);
    this.replace(span.start, 0, span.end, 0, text);
  }
}

const numbered = (n: number, change: (i: number) => string | undefined = () => undefined, eol = "\n") =>
  Array.from({ length: n }, (_, i) => change(i + 1) ?? `line ${i + 1}`).join(eol) + eol;

function setUp(before: string, after: string) {
  const hunks = reviewable(before, after, hunksOf(before, after));
  assert.ok(hunks, "reviewable");
  const review = new Review(before, hunks);
  return { hunks, review, doc: new Doc(after, review) };
}

describe("review of an edit, hunk by hunk", () => {
  const before = numbered(30);
  const after = numbered(30, (i) => (i === 3 ? "three" : i === 20 ? "twenty" : i === 21 ? undefined : undefined))
    .replace("line 25\n", "line 25\nextra\n");

  it("finds the hunks difflib made, with the lines of the file before the edit", () => {
    const { hunks } = setUp(before, after);
    assert.deepEqual(hunks.map((h) => h.label), ["lines 1-6", "lines 17-28"]);
    assert.deepEqual(hunks.map((h) => h.oldLines.length), [6, 12]);
    assert.deepEqual(hunks[1].newLines.slice(hunks[1].firstChange, hunks[1].firstChange + 1), ["twenty\n"]);
  });

  it("accepting everything is a plain allow", () => {
    const { review, doc } = setUp(before, after);
    assert.deepEqual(review.answer({ decision: "allowOnce" }, doc.text, after, new Map()), { decision: "allowOnce" });
  });

  it("a rejected hunk puts the old lines back, and the answer lists the decisions with the message", () => {
    const { review, doc } = setUp(before, after);
    doc.decide(0, "reject");
    assert.equal(doc.text, numbered(30, (i) => (i === 20 ? "twenty" : undefined)).replace("line 25\n", "line 25\nextra\n"));
    assert.deepEqual(review.states(doc.text), ["reject", "accept"]);
    const answer = review.answer({ decision: "allowOnce" }, doc.text, after, new Map([[0, "keep three as it was"]]));
    assert.deepEqual(answer, {
      decision: "allowOnce",
      hunks: [{ index: 0, decision: "reject", message: "keep three as it was" }, { index: 1, decision: "accept" }],
    });
  });

  it("the spans follow the document: rejecting the first hunk moves the second", () => {
    const lines = numbered(30, (i) => (i === 3 || i === 4 ? undefined : undefined));
    const grown = lines.replace("line 2\n", "line 2\nnew a\nnew b\nnew c\n").replace("line 20\n", "TWENTY\n");
    const { review, doc } = setUp(lines, grown);
    const second = { ...review.spans[1] };
    doc.decide(0, "reject");
    assert.deepEqual(review.spans[1], { start: second.start - 3, end: second.end - 3 });
    doc.decide(1, "reject");
    assert.equal(doc.text, lines);
    assert.deepEqual(review.states(doc.text), ["reject", "reject"]);
    doc.decide(0, "accept");
    doc.decide(1, "accept");
    assert.equal(doc.text, grown);
    assert.deepEqual(review.answer({ decision: "allowAlways", rule: "Edit(x)" }, doc.text, grown, new Map([[0, "stale"]])), {
      decision: "allowAlways",
      rule: "Edit(x)",
    });
  });

  it("the user's own change anywhere makes the answer the text", () => {
    const { review, doc } = setUp(before, after);
    doc.decide(1, "reject");
    doc.replace(10, 7, 10, 7, " (mine)");
    assert.deepEqual(review.states(doc.text), ["accept", "reject"]);
    assert.deepEqual(review.answer({ decision: "allowOnce" }, doc.text, after, new Map()), { decision: "allowOnce", finalText: doc.text });
    assert.match(doc.text, /line 11 \(mine\)\n/);
  });

  it("a change inside a hunk makes it edited; lines typed above a hunk move it", () => {
    const { review, doc } = setUp(before, after);
    doc.replace(2, 0, 2, 5, "THREE");
    assert.deepEqual(review.states(doc.text), ["edited", "accept"]);
    doc.replace(0, 0, 0, 0, "top\nmore\n");
    assert.deepEqual(review.states(doc.text), ["edited", "accept"]);
    doc.decide(1, "reject");
    assert.deepEqual(review.states(doc.text), ["edited", "reject"]);
    assert.ok(doc.text.startsWith("top\nmore\nline 1\nline 2\nTHREE\n"));
    assert.equal(review.answer({ decision: "allowOnce" }, doc.text, after, new Map()).finalText, doc.text);
    // Joining a hunk's first line onto the line above it is inside that hunk too.
    doc.replace(1, 4, 2, 0, "");
    assert.deepEqual(review.states(doc.text), ["edited", "reject"]);
  });

  it("the last line without a final newline, rejected and accepted again", () => {
    const b = "a\nb\nc\nd";
    const a = "a\nb\nc\nD";
    const { doc } = setUp(b, a);
    doc.decide(0, "reject");
    assert.equal(doc.text, b);
    doc.decide(0, "accept");
    assert.equal(doc.text, a);
    const added = setUp("a\nb\n", "a\nb\nc");
    added.doc.decide(0, "reject");
    assert.equal(added.doc.text, "a\nb\n");
    assert.deepEqual(added.review.states(added.doc.text), ["reject"]);
  });

  it("a new file is one hunk; rejecting it leaves nothing", () => {
    const { review, doc } = setUp("", "print(1)\nprint(2)\n");
    doc.decide(0, "reject");
    assert.equal(doc.text, "");
    assert.deepEqual(review.answer({ decision: "allowOnce" }, doc.text, "print(1)\nprint(2)\n", new Map()), {
      decision: "allowOnce",
      hunks: [{ index: 0, decision: "reject" }],
    });
  });

  it("CRLF texts are reviewable; mixed line breaks, other Unicode breaks and a BOM are not", () => {
    const crlfBefore = numbered(12, undefined, "\r\n");
    const crlfAfter = numbered(12, (i) => (i === 6 ? "six" : undefined), "\r\n");
    const { doc } = setUp(crlfBefore, crlfAfter);
    doc.decide(0, "reject");
    assert.equal(doc.text, crlfBefore);
    const no = (b: string, a: string) => assert.equal(reviewable(b, a, hunksOf(b, a)), undefined, JSON.stringify([b, a]));
    no("a\r\nb\n", "a\r\nB\n");
    no("a\nb\n", "a\r\nB\r\n");
    no("a\u2028b\n", "a\u2028B\n");
    no("a\fb\n", "a\fB\n");
    no("a\rb\r", "a\rB\r");
    no("\ufeffa\nb\n", "\ufeffa\nB\n");
    assert.equal(reviewable("a\n", "b\n", []), undefined, "no hunks");
    assert.equal(reviewable("a\n", "b\n", hunksOf("x\na\ny\n", "x\nb\ny\n")), undefined, "hunks that do not fit");
  });

  it("the hunk at a line: inside a hunk, else the next one, else the last", () => {
    const { review } = setUp(before, after);
    assert.equal(review.hunkAt(0), 0);
    assert.equal(review.hunkAt(10), 1);
    assert.equal(review.hunkAt(29), 1);
  });

  it("splits lines as Python's splitlines(keepends=True) does for \\n and \\r\\n", () => {
    assert.deepEqual(splitLines("a\r\nb\nc"), ["a\r\n", "b\n", "c"]);
    assert.deepEqual(splitLines(""), []);
    assert.deepEqual(splitLines("\n\n"), ["\n", "\n"]);
  });
});
