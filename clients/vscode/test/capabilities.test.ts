/**
 * What the daemon asks of the editor at `initialize`. The extension syncs the workspace's files
 * to it, and vscode-languageclient registers a language feature (completion, hover, code
 * actions, …) for those files for every provider capability the server declares: the daemon
 * must declare none, only document sync, so it never takes over the user's editing.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { startDaemon, tempDir } from "./support/processes";

/** Capabilities that register nothing in the editor (executeCommandProvider only with no commands). */
const HARMLESS = new Set(["positionEncoding", "textDocumentSync", "workspace", "experimental", "executeCommandProvider"]);

describe("the daemon's server capabilities", () => {
  it("are document sync (incremental) and no language feature", async () => {
    const state = tempDir("heddle-state-");
    const daemon = await startDaemon({ XDG_STATE_HOME: state.path }, state.path);
    try {
      const capabilities = daemon.capabilities;
      assert.deepEqual(Object.keys(capabilities).filter((key) => !HARMLESS.has(key)), []);
      assert.deepEqual(capabilities.executeCommandProvider ?? { commands: [] }, { commands: [] });
      const sync = capabilities.textDocumentSync as { openClose?: boolean; change?: number };
      assert.equal(sync.openClose, true);
      assert.equal(sync.change, 2, "incremental");
    } finally {
      await daemon.stop();
      state.remove();
    }
  });
});
