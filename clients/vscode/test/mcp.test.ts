/**
 * A session's MCP servers in the extension: what a change the daemon reports
 * (`mcpServer/changed`) tells the user (src/mcpServers.ts) and how the chat shows it
 * (src/transcript.ts); and, against the real daemon, that the changes of the open session's
 * server reach the host (src/session.ts) — while no turn runs — each with its last output.
 */

import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { mcpNotice } from "../src/mcpServers";
import type { McpServerChangedParams } from "../src/protocol.generated";
import { Conversation } from "../src/session";
import { EMPTY, reduce } from "../src/transcript";
import { deadline, python, REPO, startDaemon, startScripted, tempDir, type DaemonProcess, type Scripted } from "./support/processes";
import { allow, Recorder } from "./support/recorder";

const change = (state: McpServerChangedParams["server"]["state"], message: string, stderr?: string[]): McpServerChangedParams => ({
  sessionId: "s1",
  server: { name: "srv", transport: "stdio", source: "user", state, tools: ["mcp__srv__echo"] },
  message,
  ...(stderr ? { stderr } : {}),
});

describe("an MCP server's changes", () => {
  it("a restart is a warning, a failure an error, each with the server's last output; running again is information", () => {
    assert.deepEqual(mcpNotice(change("restarting", "MCP server srv stopped (exited with code 5); restarting it in 0.5 s (restart 1 of 3).", ["loading", "error: corrupt"])), {
      level: "warning",
      text: "MCP server srv stopped (exited with code 5); restarting it in 0.5 s (restart 1 of 3). Its last output:",
      detail: "loading\nerror: corrupt",
    });
    assert.equal(mcpNotice(change("failed", "MCP server srv failed.", ["gone"])).level, "error");
    assert.deepEqual(mcpNotice(change("ready", "MCP server srv is running again (restart 1 of 3).")), {
      level: "info", text: "MCP server srv is running again (restart 1 of 3).",
    });
  });

  it("the chat shows the notice with its detail", () => {
    const { transcript } = reduce(EMPTY, { type: "notice", level: "error", text: "MCP server srv failed. Its last output:", detail: "gone" });
    assert.deepEqual(transcript.blocks.map((b) => b.kind === "notice" && [b.level, b.text, b.detail]), [
      ["error", "MCP server srv failed. Its last output:", "gone"],
    ]);
  });
});

describe("an MCP server's changes, against the real daemon", () => {
  let scripted: Scripted;
  let daemon: DaemonProcess;
  let home: ReturnType<typeof tempDir>;
  let workspace: ReturnType<typeof tempDir>;

  before(async () => {
    home = tempDir("heddle-mcp-home-");
    workspace = tempDir("heddle-mcp-ws-");
    scripted = await startScripted([join(REPO, "clients", "vscode", "test", "scenarios", "vscode-hello.json")]);
    // startup_timeout = 0: the session opens before the server's first start, so each of its
    // deaths (it exits at once, saying `not today`) comes after, while no turn runs.
    mkdirSync(join(home.path, "config", "heddle"), { recursive: true });
    writeFileSync(join(home.path, "config", "heddle", "settings.toml"), [
      "[mcp]", "startup_timeout = 0", "", "[mcp.servers.srv]", `command = ${JSON.stringify(python())}`,
      `args = ["-I", ${JSON.stringify(join(REPO, "tests", "e2e", "mcp_server.py"))}]`,
      'env = { MCP_TEST_EXIT_AT_START = "1" }', "",
    ].join("\n"));
    daemon = await startDaemon({
      ANTHROPIC_BASE_URL: scripted.url,
      ANTHROPIC_API_KEY: "test",
      XDG_STATE_HOME: join(home.path, "state"),
      XDG_CONFIG_HOME: join(home.path, "config"),
    }, home.path);
  });

  after(async () => {
    await daemon?.stop();
    await scripted?.stop();
    workspace?.remove();
    home?.remove();
  });

  it("each restart and the failure reach the host, with the server's last output", async () => {
    const host = new Recorder(allow("allowOnce"));
    const conversation = new Conversation(daemon.connection, host);
    const result = await deadline(conversation.ask({ workspace: workspace.path, model: "vscode-hello" }, "Hello"), 20000, "the turn");
    assert.equal(result.text, "Hello.");

    await host.until(() => host.mcpChanges.some((c) => c.server.state === "failed"), "the server's failure", 40000);

    const sessionId = conversation.sessionInfo?.sessionId;
    assert.deepEqual(host.mcpChanges.map((c) => [c.sessionId, c.server.state, c.restartInMs, c.stderr]), [
      [sessionId, "restarting", 500, ["not today"]],
      [sessionId, "restarting", 1000, ["not today"]],
      [sessionId, "restarting", 2000, ["not today"]],
      [sessionId, "failed", undefined, ["not today"]],
    ]);
    assert.equal(host.mcpChanges[3].message, "MCP server srv failed (exited with code 7) and was restarted 3 times; it is not restarted again, so its tools are not offered in this session.");
  });
});
