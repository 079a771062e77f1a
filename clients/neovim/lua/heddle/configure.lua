--- Changing a conversation's permission mode and model from its next turn on, through the
--- daemon's `session/configure` (which refuses while a turn runs, so a change made then waits
--- in `conv.pending` until the turn has ended; one made before the session opened goes into
--- its `session/new`).
local client = require('heddle.client')
local protocol = require('heddle.protocol')

local M = {}

local function notify(message, level)
  vim.notify('heddle: ' .. message, level or vim.log.levels.INFO)
end

--- `{ permissionMode = 'plan' }` as words.
function M.describe(fields)
  local parts = {}
  if fields.permissionMode then
    table.insert(parts, 'mode ' .. fields.permissionMode)
  end
  if fields.model then
    table.insert(parts, 'model ' .. fields.model)
  end
  return table.concat(parts, ', ')
end

--- Adds `fields` to what `conv` should change; sends it at once unless `busy` (a turn of it
--- runs) or its session is not open or not loaded.
function M.change(conv, fields, busy)
  conv.pending = vim.tbl_extend('force', conv.pending or {}, fields)
  if not conv.id then
    return notify(('%s for the next session'):format(M.describe(conv.pending)))
  end
  if conv.unloaded or busy then
    return notify(('%s from the next turn (a turn is running or the session is not loaded yet)')
      :format(M.describe(conv.pending)))
  end
  M.send(conv)
end

--- Sends the conversation's pending mode and model, then `cb()`.
function M.send(conv, cb)
  local params = vim.tbl_extend('force', { sessionId = conv.id }, conv.pending or {})
  conv.pending = nil
  client.request(protocol.methods.SESSION_CONFIGURE, params, function(err, result)
    if err then
      notify('could not change the session: ' .. (err.message or ''), vim.log.levels.ERROR)
    else
      conv.info = vim.tbl_extend('force', conv.info or {}, result)
      local message = ('mode %s, model %s from the next turn'):format(result.permissionMode,
        result.model)
      conv.transcript:note(message)
      notify(message)
    end
    if cb then
      cb()
    end
  end)
end

return M
