/**
 * Apply a unified diff to a text, so a permission prompt can show the edit as a before/after
 * pair in the editor's diff view. Pure; returns undefined when the diff does not fit the text.
 */

interface Hunk {
  /** 0-based index of the first old line the hunk touches. */
  start: number;
  lines: string[];
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

export function parseHunks(diff: string): Hunk[] {
  const hunks: Hunk[] = [];
  let current: Hunk | undefined;
  for (const line of diff.split("\n")) {
    const header = HUNK_HEADER.exec(line);
    if (header) {
      // `-5,0` inserts after line 5; otherwise `-5,n` starts at line 5.
      const oldStart = Number(header[1]);
      const oldCount = header[2] === undefined ? 1 : Number(header[2]);
      current = { start: oldCount === 0 ? oldStart : Math.max(oldStart - 1, 0), lines: [] };
      hunks.push(current);
    } else if (current && (line.startsWith(" ") || line.startsWith("+") || line.startsWith("-") || line.startsWith("\\"))) {
      current.lines.push(line);
    } else if (current && line === "") {
      // A blank context line whose leading space was stripped, or the diff's final newline.
      current.lines.push(" ");
    }
  }
  for (const hunk of hunks) {
    while (hunk.lines.length && hunk.lines[hunk.lines.length - 1] === " ") hunk.lines.pop();
  }
  return hunks;
}

export function applyUnifiedDiff(before: string, diff: string): string | undefined {
  const hunks = parseHunks(diff);
  if (hunks.length === 0) return undefined;
  const eol = before.includes("\r\n") ? "\r\n" : "\n";
  const source = before === "" ? [] : before.split(/\r?\n/);
  const endsWithNewline = before === "" || before.endsWith("\n");
  if (endsWithNewline && source.length) source.pop();
  const out: string[] = [];
  let cursor = 0;
  let finalNewline = endsWithNewline;
  for (const hunk of hunks) {
    const start = hunk.start;
    if (start < cursor) return undefined;
    out.push(...source.slice(cursor, start));
    cursor = start;
    let previous = "";
    for (const line of hunk.lines) {
      const body = line.slice(1);
      if (line.startsWith("\\")) {
        if (previous === "+") finalNewline = false;
        continue;
      }
      if (line.startsWith("+")) {
        out.push(body);
      } else {
        if (source[cursor] !== body) return undefined;
        if (line.startsWith(" ")) out.push(body);
        cursor++;
      }
      previous = line[0];
    }
  }
  out.push(...source.slice(cursor));
  if (out.length === 0) return "";
  return out.join(eol) + (finalNewline ? eol : "");
}
