/**
 * What the user is told when one of the session's MCP servers changes state after the session
 * opened (`mcpServer/changed`): it stopped and is restarted, runs again, became ready late, or
 * failed for good. Free of any editor API, so the unit tests check it in plain Node.
 */

import type { McpServerChangedParams } from "./protocol.generated";

export interface McpNotice {
  level: "info" | "warning" | "error";
  /** The daemon's one line, then where the server's last output follows. */
  text: string;
  /** The last lines the server wrote to stderr before it stopped (secrets already masked). */
  detail?: string;
}

const LEVELS: Record<string, McpNotice["level"]> = { failed: "error", restarting: "warning" };

export function mcpNotice(params: McpServerChangedParams): McpNotice {
  const level = LEVELS[params.server.state] ?? "info";
  const stderr = params.stderr ?? [];
  if (!stderr.length) return { level, text: params.message };
  return { level, text: `${params.message} Its last output:`, detail: stderr.join("\n") };
}
