"""MCP servers as tools: a session's outside tool servers (Model Context Protocol), on the
official `mcp` SDK, which is imported only once a session has a server to start.

- `config`: one server's configuration (`McpServerConfig`), from the settings files or from a
  front door (ACP's `session/new.mcpServers`);
- `servers`: a session's running servers (`McpServers`, `start_servers`): started in
  parallel, restarted a bounded number of times, stopped with the session;
- `tools`: each server tool as a Heddle `Tool` named `mcp__<server>__<tool>`.
"""
