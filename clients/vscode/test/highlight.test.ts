/** The code blocks' highlighter: pure, no browser. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { highlight } from "../src/webview/highlight";

const strip = (html: string) => html.replace(/<[^>]+>/g, "").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, "&");

describe("highlight", () => {
  it("marks keywords, strings, numbers and comments", () => {
    const html = highlight('def greet(name):\n    return f"Hi {name}" # 2 ways\n', "python");
    assert.match(html, /<span class="hl-keyword">def<\/span> greet/);
    assert.match(html, /<span class="hl-keyword">return<\/span>/);
    assert.match(html, /<span class="hl-string">&quot;Hi \{name\}&quot;<\/span>/);
    assert.match(html, /<span class="hl-comment"># 2 ways<\/span>/);
  });

  it("keeps every character and escapes markup", () => {
    const code = 'if (a < b && s == "<script>") { x = 0x1f; } // done\n#include <x>';
    const html = highlight(code, "c");
    assert.equal(strip(html), code);
    assert.doesNotMatch(html, /<script>/);
    assert.match(html, /<span class="hl-number">0x1f<\/span>/);
    assert.doesNotMatch(html, /hl-comment">#include/, "# is not a comment in C");
  });
});
