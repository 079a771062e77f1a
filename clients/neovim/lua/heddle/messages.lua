--- The daemon's `window/showMessage` messages, and what happens to a session's MCP servers
--- (`mcpServer/changed`), shown with `vim.notify`.
---
--- The daemon's warning about untrusted project settings comes just before the `session/new`
--- (or `session/load`) result that repeats it with what to trust, so messages that come while a
--- session opens wait for its result (both arrive in order) and are not shown twice.
local client = require('heddle.client')
local protocol = require('heddle.protocol')

local M = {}

local opening = 0 -- `session/new` and `session/load` requests in flight
local held = {} ---@type table[] `window/showMessage` params that came while a session opened

local function notify(message, level)
  vim.notify('heddle: ' .. message, level or vim.log.levels.INFO)
end

local message_levels = {
  [1] = vim.log.levels.ERROR,
  [2] = vim.log.levels.WARN,
  [3] = vim.log.levels.INFO,
  [4] = vim.log.levels.DEBUG,
}

local function show_message(params)
  notify(params.message, message_levels[params.type] or vim.log.levels.INFO)
end

--- A session starts opening: messages wait for its result.
function M.hold()
  opening = opening + 1
end

--- A session opened (`result`) or failed to (nil): shows the messages held meanwhile, but
--- those its result repeats about untrusted settings (`heddle.trust` warns about those, saying
--- what to do), then the result's other warnings (problems in the settings files, which the
--- daemon only returns): each distinct one once.
function M.release(result)
  opening = opening - 1
  local messages = held
  held = {}
  local warnings = result and result.warnings or {}
  local repeated = result and result.untrustedSettings and warnings or {}
  local shown = {}
  for _, params in ipairs(messages) do
    if not shown[params.message] and not vim.tbl_contains(repeated, params.message) then
      show_message(params)
    end
    shown[params.message] = true
  end
  for _, warning in ipairs(warnings) do
    if not shown[warning] then
      notify(warning, vim.log.levels.WARN)
    end
    shown[warning] = true
  end
end

client.handlers[client.SHOW_MESSAGE] = function(params)
  if opening > 0 then
    table.insert(held, params)
  else
    show_message(params)
  end
end

local mcp_levels = {
  failed = vim.log.levels.ERROR,
  restarting = vim.log.levels.WARN,
}

--- An MCP server died and is restarted, runs again, or failed for good: its message, then the
--- last lines it wrote to stderr. Shown at once, also between turns.
client.handlers[protocol.methods.MCPSERVER_CHANGED] = function(params)
  local lines = { params.message }
  if params.stderr and #params.stderr > 0 then
    table.insert(lines, '  its last output:')
    for _, line in ipairs(params.stderr) do
      table.insert(lines, '    ' .. line)
    end
  end
  notify(table.concat(lines, '\n'), mcp_levels[params.server.state] or vim.log.levels.INFO)
end

return M
