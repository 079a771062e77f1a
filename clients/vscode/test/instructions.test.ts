/** The line the panel shows when a session opens: its instruction files (src/instructions.ts). */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { instructionsNotice } from "../src/instructions";

describe("the instruction files in force", () => {
  it("names them relative to the workspace, outside it in full, and says which were cut", () => {
    assert.equal(instructionsNotice([
      { path: "/home/me/.config/heddle/AGENTS.md", scope: "user", bytes: 10 },
      { path: "/repo/AGENTS.md", scope: "project", bytes: 99 },
      { path: "/repo/app/CLAUDE.md", scope: "project", bytes: 40_000, truncated: true },
    ], "/repo/app"), "Instructions in force: /home/me/.config/heddle/AGENTS.md, /repo/AGENTS.md, CLAUDE.md (cut to fit the cap).");
  });

  it("says nothing when there are none", () => {
    assert.equal(instructionsNotice(undefined, "/repo"), undefined);
    assert.equal(instructionsNotice([], "/repo"), undefined);
  });
});
