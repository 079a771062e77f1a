/** @-mentions in a prompt: pure, no editor. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { mentionedPaths, startsMention } from "../src/mentions";

describe("mentions", () => {
  it("finds each @path once, without the sentence's punctuation", () => {
    assert.deepEqual(mentionedPaths("@app.py and see @src/util.py, then @app.py."), ["app.py", "src/util.py"]);
  });

  it("needs the @ to start a word (an address is not a mention)", () => {
    assert.deepEqual(mentionedPaths("mail me@example.com about @notes.md"), ["notes.md"]);
    assert.deepEqual(mentionedPaths("a lone @ sign"), []);
  });

  it("opens the picker only for an @ that starts a word", () => {
    assert.equal(startsMention("@", 1), true);
    assert.equal(startsMention("see @", 5), true);
    assert.equal(startsMention("me@", 3), false);
    assert.equal(startsMention("", 0), false);
  });
});
