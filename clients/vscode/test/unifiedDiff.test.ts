/** Applying the daemon's unified diffs to build the before/after pair of the diff view. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { applyUnifiedDiff } from "../src/unifiedDiff";

describe("applyUnifiedDiff", () => {
  it("replaces a line", () => {
    const diff = "--- a/hello.py\n+++ b/hello.py\n@@ -1 +1 @@\n-print(\"Hello, wrold\")\n+print(\"Hello, world\")\n";
    assert.equal(applyUnifiedDiff('print("Hello, wrold")\n', diff), 'print("Hello, world")\n');
  });

  it("applies several hunks with context, keeping CRLF line ends", () => {
    const before = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"].join("\r\n") + "\r\n";
    const diff = [
      "--- a/x", "+++ b/x",
      "@@ -1,3 +1,3 @@", " a", "-b", "+B", " c",
      "@@ -8,3 +8,4 @@", " h", " i", "+i2", " j", "",
    ].join("\n");
    assert.equal(applyUnifiedDiff(before, diff), ["a", "B", "c", "d", "e", "f", "g", "h", "i", "i2", "j"].join("\r\n") + "\r\n");
  });

  it("creates a new file and handles a missing final newline", () => {
    assert.equal(applyUnifiedDiff("", "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"), "one\ntwo\n");
    assert.equal(
      applyUnifiedDiff("one\n", "@@ -1 +1 @@\n-one\n+uno\n\\ No newline at end of file\n"),
      "uno",
    );
  });

  it("inserts after a line for a zero-length old range", () => {
    assert.equal(applyUnifiedDiff("a\nb\n", "@@ -1,0 +2 @@\n+x\n"), "a\nx\nb\n");
  });

  it("returns undefined when the text does not match the diff", () => {
    assert.equal(applyUnifiedDiff("something else\n", "@@ -1 +1 @@\n-one\n+uno\n"), undefined);
    assert.equal(applyUnifiedDiff("x\n", "not a diff"), undefined);
  });
});
