--- Conversations and turns: what `:AgentRun`, `:AgentCancel` and `:AgentNew` do.
---
--- A conversation is one daemon session and its transcript. Prompts continue the current
--- conversation until `new()` starts another; the daemon session is opened on the first prompt.
--- One turn runs at a time. A turn is a `turn/start` request that stays open until the turn
--- ends; its `turn/event` notifications and `permission/request`s are routed by session id.
local client = require('heddle.client')
local config = require('heddle.config')
local documents = require('heddle.documents')
local edits = require('heddle.edits')
local permission = require('heddle.permission')
local protocol = require('heddle.protocol')
local review = require('heddle.review')
local trust = require('heddle.trust')
local ui = require('heddle.ui')

local methods = protocol.methods
-- assert: a name the generated table lacks fails on load, not as a branch never taken
local SESSION_NOT_FOUND = assert(protocol.errors.SESSION_NOT_FOUND)
local M = {}

---@class heddle.Conversation
---@field number integer
---@field id string? daemon session id, once `session/new` answered
---@field info table? the `session/new` result
---@field transcript heddle.Transcript
---@field stale boolean? the next prompt starts a new conversation (its settings were trusted)

---@class heddle.Turn
---@field conversation heddle.Conversation
---@field id string? turn id, from the first `turn/event`
---@field cancelled boolean
---@field waiting boolean a permission prompt is open

local current = nil ---@type heddle.Conversation?
local turn = nil ---@type heddle.Turn?
local by_session = {} ---@type table<string, heddle.Conversation>
local count = 0
local last = nil ---@type table? how the last turn ended: the `turn/start` result, or `{ error }`
local opening = 0 -- `session/new` requests in flight
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

--- Shows the messages held while a session opened, but those its result repeats about
--- untrusted settings (`heddle.trust` warns about those, saying what to do), then the result's
--- other warnings (problems in the settings files, which the daemon only returns): each
--- distinct one once.
local function release_messages(result)
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

local function window_opts(replaces)
  local w = config.options.window
  return { position = w.position, size = w.size, enter = w.enter, replaces = replaces }
end

local function new_conversation()
  count = count + 1
  local previous = current and current.transcript.buf
  current = { number = count, transcript = ui.new(('heddle://session/%d'):format(count)) }
  return current, previous
end

local function end_turn(t, result, err)
  if t.ended then
    return
  end
  t.ended = true
  review.cancel('The turn ended before the user answered.')
  t.conversation.transcript:end_turn(result, err)
  if turn == t then
    turn = nil
    last = result or { error = err }
  end
  if err and err.code == SESSION_NOT_FOUND then
    t.conversation.id = nil
  end
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'HeddleTurnDone',
    modeline = false,
    data = { result = result, error = err, buf = t.conversation.transcript.buf },
  })
end

--- Opens the daemon session of `conv` if it has none, then calls `cb(err)`.
local function with_session(conv, cb)
  if conv.id then
    return cb(nil)
  end
  local opts = config.options
  local params = {
    workspace = config.workspace(),
    model = opts.model,
    permissionMode = opts.permission_mode,
  }
  documents.add_root(params.workspace)
  opening = opening + 1
  client.request(methods.SESSION_NEW, params, function(err, result)
    opening = opening - 1
    release_messages(not err and result or nil)
    if err then
      return cb(err)
    end
    conv.id, conv.info = result.sessionId, result
    by_session[conv.id] = conv
    trust.remember(result)
    cb(nil)
  end)
end

--- Starts a turn with `prompt` in the current conversation.
--- @param prompt string
--- @param context table[] context items (see `heddle.context`)
function M.run(prompt, context)
  if turn then
    notify('a turn is running; :AgentCancel stops it', vim.log.levels.WARN)
    return false
  end
  local conv, previous = current, nil
  if not conv or conv.stale then
    conv, previous = new_conversation()
  end
  conv.transcript:show(window_opts(previous))
  conv.transcript:begin_turn(prompt, context)
  local t = { conversation = conv, cancelled = false, waiting = false }
  turn = t
  local function fail(err)
    end_turn(t, nil, type(err) == 'table' and err or { message = tostring(err) })
  end
  client.with_client(function(_, err)
    if err then
      return fail(err)
    end
    with_session(conv, function(serr)
      if serr then
        return fail(serr)
      end
      if t.cancelled then
        return end_turn(t, { reason = 'cancelled', usage = {} })
      end
      local params = { sessionId = conv.id, prompt = prompt }
      if context and #context > 0 then
        params.context = context
      end
      client.request(methods.TURN_START, params, function(terr, result)
        if terr then
          return fail(terr)
        end
        end_turn(t, result)
      end)
    end)
  end)
  return true
end

--- Cancels the running turn; returns false if none runs.
function M.cancel()
  local t = turn
  if not t then
    notify('no turn is running')
    return false
  end
  t.cancelled = true
  if t.conversation.id then
    -- Without a turn id yet, the daemon cancels whatever turn the session runs.
    client.notify(methods.TURN_CANCEL, { sessionId = t.conversation.id, turnId = t.id })
  end
  return true
end

--- Starts a new conversation; a running turn is cancelled and finishes in the old transcript.
function M.new()
  if turn then
    M.cancel()
    turn = nil
  end
  local conv, previous = new_conversation()
  conv.transcript:show(window_opts(previous))
end

--- The next prompt starts a new conversation, because what a session reads when it opens has
--- changed (its settings were trusted); a running turn finishes in the current one. Returns
--- false if there is no session to renew (the next prompt opens one anyway).
function M.renew()
  if not current or not (current.id or turn) then
    return false
  end
  current.stale = true
  current.transcript:note('project settings trusted: the next prompt starts a new session')
  return true
end

--- Shows the current conversation's transcript (opening an empty one if there is none).
--- @param enter boolean? move the cursor into it
function M.show(enter)
  local conv, previous = current, nil
  if not conv then
    conv, previous = new_conversation()
  end
  local opts = window_opts(previous)
  if enter ~= nil then
    opts.enter = enter
  end
  return conv.transcript:show(opts)
end

--- Where things stand, for statuslines and scripts.
function M.status()
  local state = 'idle'
  if turn then
    state = turn.waiting and 'waiting' or (turn.conversation.id and 'running' or 'starting')
  end
  return {
    state = state,
    session_id = current and current.id,
    turn_id = turn and turn.id,
    buf = current and current.transcript.buf,
    last = last,
  }
end

--- The transcript buffer of the current conversation, if any.
function M.buffer()
  return current and current.transcript.buf
end

client.handlers[methods.TURN_EVENT] = function(params)
  local conv = by_session[params.sessionId]
  if not conv then
    return
  end
  if turn and turn.conversation == conv then
    turn.id = turn.id or params.turnId
  end
  conv.transcript:event(params.event)
  local ev = type(params.event) == 'table' and params.event or {}
  if ev.kind == 'toolCallFinished' then
    edits.finished(ev)
  elseif ev.kind == 'permissionAnswered' then
    review.decided(ev.toolCallId)
  end
end

-- The daemon's warning about untrusted project settings comes just before the `session/new`
-- result that repeats it with what to trust, so messages that come while a session opens wait
-- for its result (both arrive in order) and are not shown twice.
client.handlers[client.SHOW_MESSAGE] = function(params)
  if opening > 0 then
    table.insert(held, params)
  else
    show_message(params)
  end
end

client.handlers[methods.PERMISSION_REQUEST] = function(params)
  local conv = by_session[params.sessionId]
  local t = turn
  if not conv or not t or t.conversation ~= conv or t.cancelled then
    return { decision = 'reject', message = 'The turn was cancelled.' }
  end
  conv.transcript:permission_asked(params.toolCallId, params.title, params.preview)
  conv.transcript:show(window_opts())
  t.waiting = true
  local ok, result = pcall(permission.ask, params)
  t.waiting = false
  if not ok then
    notify(tostring(result), vim.log.levels.ERROR)
    return { decision = 'reject', message = 'The permission prompt failed.' }
  end
  return result
end

client.on_exit = function(reason, clean)
  for id, conv in pairs(by_session) do
    conv.id = nil
    by_session[id] = nil
  end
  if turn then
    end_turn(turn, nil, { message = reason })
  elseif current and not clean then
    current.transcript:note(reason .. '; the next prompt starts a new session')
  end
end

return M
