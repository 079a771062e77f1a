--- Conversations and turns: what `:AgentRun`, `:AgentCancel`, `:AgentNew`, `:AgentResume` do.
---
--- A conversation is one daemon session and its output buffer. Prompts continue the current
--- conversation until `new()` starts another (or `resume()` goes to another); the daemon session
--- is opened on the first prompt, and closed when the user leaves it. A prompt sent while a turn runs is queued (or, with `steer`, interrupts it): the
--- `turn/start` requests in flight make one activity, idle once the last one answered. Headers
--- and footers are drawn from `turnStarted` / `turnEnded`, so a replayed history (`session/load`)
--- shows the same as a live one. If the daemon dies, the conversation keeps its session id, and
--- the next prompt loads the session in the new daemon, then continues it.
local client = require('heddle.client')
local config = require('heddle.config')
local documents = require('heddle.documents')
local edits = require('heddle.edits')
local format = require('heddle.format')
local messages = require('heddle.messages')
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
---@field id string? daemon session id, once `session/new` answered (or the one to load)
---@field info table? the `session/new` / `session/load` result (mode and model kept current)
---@field transcript heddle.Transcript
---@field stale boolean? the next prompt starts a new conversation (its settings were trusted)
---@field unloaded boolean? `id` is not loaded in the running daemon (it exited, it was left, or a resume)
---@field closing function[]? waiting for the `session/close` of `id` (the user left it) to answer
---@field claim boolean? the next `turnStarted` is a prompt whose header is drawn already
---@field ended table<string, boolean> turns whose footer is drawn
---@field context table? `{ tokens, window }` of the last `usage` event
---@field pending table? `session/configure` fields to send once the session is idle and loaded

---@class heddle.Turn
---@field conversation heddle.Conversation
---@field id string? the id of the turn running now, from its `turnStarted`
---@field requests integer `turn/start` requests not answered yet
---@field cancelled boolean
---@field waiting boolean a permission prompt is open

local current = nil ---@type heddle.Conversation?
local turn = nil ---@type heddle.Turn?
local by_session = {} ---@type table<string, heddle.Conversation> live in the running daemon
local conversations = {} ---@type heddle.Conversation[] every one, oldest first
local count = 0
local last = nil ---@type table? how the last turn ended: the `turn/start` result, or `{ error }`

local function notify(message, level)
  vim.notify('heddle: ' .. message, level or vim.log.levels.INFO)
end

local function show(conv, replaces, enter)
  return require('heddle.chat').show(conv.transcript, { replaces = replaces, enter = enter })
end

local function new_conversation()
  count = count + 1
  local previous = current and current.transcript.buf
  current = {
    number = count,
    transcript = ui.new(('heddle://session/%d'):format(count)),
    ended = {},
  }
  table.insert(conversations, current)
  return current, previous
end

local function first_line(text)
  local line = vim.split(vim.trim(text), '\n', { plain = true })[1]
  return #line > 60 and line:sub(1, 57) .. '...' or line
end

--- Ends the activity `t` once its last request answered (or at once, with `force`).
local function settle(t, force)
  if t.done or (t.requests > 0 and not force) then
    return
  end
  t.done = true
  review.cancel('The turn ended before the user answered.')
  if turn == t then
    turn = nil
  end
  local conv = t.conversation
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'HeddleTurnDone',
    modeline = false,
    data = { result = last and last.reason and last or nil, error = last and last.error,
             buf = conv.transcript.buf },
  })
  if conv.pending and conv.id and not conv.unloaded then
    require('heddle.configure').send(conv)
  end
end

--- A `turn/start` of activity `t` answered: `result`, or the error `err`.
local function answered(t, result, err)
  if t.done then
    return
  end
  t.requests = t.requests - 1
  local conv = t.conversation
  if err then
    if not t.failed then
      t.failed = true
      conv.transcript:end_turn(nil, err)
    end
    last = { error = err }
    if err.code == SESSION_NOT_FOUND then
      conv.id = nil
    end
  else
    if result.turnId and not conv.ended[result.turnId] then
      conv.ended[result.turnId] = true
      conv.transcript:end_turn(result)
    end
    last = result
  end
  settle(t)
end

--- Closes the daemon session of `conv`, which the user left (`:AgentNew`, another session
--- resumed, renewed settings): its turn, if any, is cancelled and its MCP servers stop. Its
--- transcript stays, so `:AgentResume` loads it again, into the same buffer.
local function close(conv)
  if conv.loading then -- left while it loads: closed once loaded, unless it is back in use
    return table.insert(conv.loading, function(err)
      if not err and current ~= conv and not (turn and turn.conversation == conv) then
        close(conv)
      end
    end)
  end
  local id = conv.id
  if not id or conv.unloaded then
    return
  end
  conv.unloaded, conv.closing = true, {}
  client.request(methods.SESSION_CLOSE, { sessionId = id }, function()
    -- (an error changes nothing: the daemon stopped, or the session is not live anyway)
    local waiting = conv.closing or {}
    conv.closing = nil
    if by_session[id] == conv then -- until now, the events of its cancelled turn came in
      by_session[id] = nil
    end
    for _, fn in ipairs(waiting) do
      fn()
    end
  end)
end

--- Replays session `conv.id` into `conv`'s (emptied) transcript and makes it live in the
--- daemon; then `cb(err, result)`.
local function load(conv, cb)
  if conv.closing then -- left and resumed at once: loaded once the daemon has closed it
    return table.insert(conv.closing, function()
      load(conv, cb)
    end)
  end
  if conv.loading then -- a prompt sent while :AgentResume loads it waits for that load
    return table.insert(conv.loading, cb)
  end
  conv.loading = { cb }
  by_session[conv.id] = conv
  conv.transcript:clear()
  conv.ended, conv.replaying = {}, true
  messages.hold()
  client.request(methods.SESSION_LOAD, { sessionId = conv.id }, function(err, result)
    conv.replaying = false
    local waiting = conv.loading
    conv.loading = nil
    messages.release(not err and result or nil)
    if err then
      by_session[conv.id] = nil
    else
      conv.unloaded, conv.info = false, result
      trust.remember(result)
    end
    for _, fn in ipairs(waiting) do
      fn(err, result)
    end
  end)
end

--- Opens the daemon session of `conv` if it has none (or loads it, if the daemon that had it
--- exited), then calls `cb(err)`.
local function with_session(conv, cb)
  if conv.id and not conv.unloaded then
    return cb(nil)
  end
  if conv.id then
    return load(conv, function(err, result)
      if err then
        return cb({ message = ('could not resume session %s: %s (:AgentNew starts a new one)')
          :format(conv.id, err.message or tostring(err)) })
      end
      local message = ('resumed the session after the daemon restarted (%d earlier turn%s)')
        :format(result.turns, result.turns == 1 and '' or 's')
      conv.transcript:note(message)
      notify(message)
      if conv.pending then
        return require('heddle.configure').send(conv, function()
          cb(nil, true)
        end)
      end
      cb(nil, true)
    end)
  end
  local opts = config.options
  local pending = conv.pending or {}
  conv.pending = nil
  local params = {
    workspace = config.workspace(),
    model = pending.model or opts.model,
    permissionMode = pending.permissionMode or opts.permission_mode,
  }
  documents.add_root(params.workspace)
  messages.hold()
  client.request(methods.SESSION_NEW, params, function(err, result)
    messages.release(not err and result or nil)
    if err then
      return cb(err)
    end
    conv.id, conv.info = result.sessionId, result
    by_session[conv.id] = conv
    trust.remember(result)
    local line = format.instructions(result.instructions)
    if line then
      conv.transcript:note(line)
    end
    cb(nil)
  end)
end

--- `turn/start` for `prompt` in `t`'s session (`if_busy`: `queue` or `interrupt`; nil: none).
local function send_turn(t, prompt, context, if_busy)
  local params = { sessionId = t.conversation.id, prompt = prompt, ifBusy = if_busy }
  if context and #context > 0 then
    params.context = context
  end
  client.request(methods.TURN_START, params, function(err, result)
    answered(t, result, err)
  end)
end

--- Sends `prompt` to the running activity `t`: queued behind the running turn, or steering it.
local function join(t, prompt, context, steer)
  local conv = t.conversation
  if not conv.id or conv.unloaded then
    notify('the session is still opening; send it again in a moment', vim.log.levels.WARN)
    return false
  end
  if steer then
    conv.transcript:note('steering: ' .. first_line(prompt))
    t.cancelled = false
  else
    conv.transcript:note('queued: ' .. first_line(prompt))
    notify('a turn is running: your prompt is queued for its next step (:AgentRun! steers)')
  end
  t.requests = t.requests + 1
  send_turn(t, prompt, context, steer and 'interrupt' or 'queue')
  return true
end

--- Starts a turn with `prompt` in the current conversation; while one runs, queues it, or
--- with `opts.steer` interrupts the running turn with it.
--- @param prompt string
--- @param context table[] context items (see `heddle.context`)
--- @param opts { steer: boolean? }?
function M.run(prompt, context, opts)
  opts = opts or {}
  if turn then
    show(turn.conversation)
    return join(turn, prompt, context, opts.steer)
  end
  local conv, previous = current, nil
  if not conv or conv.stale then
    if conv then
      close(conv)
    end
    conv, previous = new_conversation()
  end
  show(conv, previous)
  local function header()
    conv.transcript:begin_turn(prompt, context)
    conv.claim = true
  end
  if not conv.unloaded then
    header()
  else
    conv.transcript:note('resuming the session…')
  end
  local t = { conversation = conv, cancelled = false, waiting = false, requests = 1 }
  turn = t
  local function fail(err)
    answered(t, nil, type(err) == 'table' and err or { message = tostring(err) })
  end
  client.with_client(function(_, err)
    if err then
      return fail(err)
    end
    with_session(conv, function(serr, loaded)
      if serr then
        return fail(serr)
      end
      if loaded then
        header()
      end
      if t.cancelled then
        conv.claim = false
        t.requests = 0
        last = { reason = 'cancelled', usage = {} }
        conv.transcript:end_turn(last)
        return settle(t)
      end
      send_turn(t, prompt, context)
    end)
  end)
  return true
end

--- Cancels the running turn (and the prompts queued behind it); returns false if none runs.
function M.cancel()
  local t = turn
  if not t then
    notify('no turn is running')
    return false
  end
  t.cancelled = true
  if t.conversation.id and not t.conversation.unloaded then
    -- Without a turn id yet, the daemon cancels whatever turn the session runs.
    client.notify(methods.TURN_CANCEL, { sessionId = t.conversation.id })
  end
  return true
end

--- Starts a new conversation; a running turn is cancelled and finishes in the old transcript,
--- whose session is closed (`:AgentResume` loads it again).
function M.new()
  if turn then
    M.cancel()
    turn = nil
  end
  if current then
    close(current)
  end
  local conv, previous = new_conversation()
  show(conv, previous)
end

--- Opens session `id` (from `session/list`) in a conversation of its own, replaying its
--- history; the next prompt continues it. A session still live (the current one, or the one
--- whose turn runs) is shown again; one left or whose daemon exited is replayed into its own
--- buffer.
function M.resume(id)
  if turn and turn.conversation.id ~= id then
    M.cancel()
    turn = nil
  end
  if current and current.id ~= id then
    close(current)
  end
  local conv, previous = nil, current and current.transcript.buf
  for _, c in ipairs(conversations) do
    if c.id == id then
      conv = c
    end
  end
  if conv then
    current = conv
    show(conv, previous ~= conv.transcript.buf and previous or nil)
    if not conv.unloaded or turn then
      return true
    end
  else
    conv, previous = new_conversation()
    conv.id, conv.unloaded = id, true
    show(conv, previous)
  end
  client.with_client(function(_, err)
    if err then
      return conv.transcript:note('could not start the daemon: ' .. err)
    end
    load(conv, function(lerr, result)
      if lerr then
        conv.id, conv.unloaded = nil, nil
        conv.transcript:note(('could not resume session %s: %s'):format(id, lerr.message or ''))
        return notify('could not resume the session: ' .. (lerr.message or ''), vim.log.levels.ERROR)
      end
      conv.transcript:note(('resumed: %s (%d turn%s); the next prompt continues it'):format(
        result.title ~= '' and result.title or id, result.turns, result.turns == 1 and '' or 's'))
    end)
  end)
  return true
end

--- Calls `cb(sessions)` with the workspace's sessions (`session/list`), newest first.
function M.list(cb)
  client.with_client(function(_, err)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    client.request(methods.SESSION_LIST, { workspace = config.workspace() }, function(lerr, result)
      if lerr then
        return notify('could not list sessions: ' .. (lerr.message or ''), vim.log.levels.ERROR)
      end
      cb(result.sessions or {})
    end)
  end)
end

--- Changes the mode and/or model (`{ permissionMode?, model? }`) of the current
--- conversation from its next turn on (`heddle.configure`).
function M.configure(fields)
  local conv = current or new_conversation()
  require('heddle.configure').change(conv, fields, turn ~= nil and turn.conversation == conv)
end

--- Calls `cb(conv)` once the current conversation has a live session (opening one).
function M.with_live_session(cb)
  local conv = current or new_conversation()
  client.with_client(function(_, err)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    with_session(conv, function(serr)
      if serr then
        return notify(serr.message or tostring(serr), vim.log.levels.ERROR)
      end
      cb(conv)
    end)
  end)
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

--- Shows the current conversation's chat (opening an empty one if there is none).
--- @param enter boolean? move the cursor into it
function M.show(enter)
  local conv, previous = current, nil
  if not conv then
    conv, previous = new_conversation()
  end
  return show(conv, previous, enter)
end

--- Where things stand, for statuslines and scripts.
function M.status()
  local state = 'idle'
  if turn then
    state = turn.waiting and 'waiting'
      or ((turn.conversation.id and not turn.conversation.unloaded) and 'running' or 'starting')
  end
  local info = current and current.info or {}
  return {
    state = state,
    session_id = current and current.id,
    turn_id = turn and turn.id,
    buf = current and current.transcript.buf,
    last = last,
    context = current and current.context,
    mode = info.permissionMode,
    model = info.model,
  }
end

--- The transcript buffer of the current conversation, if any.
function M.buffer()
  return current and current.transcript.buf
end

--- The transcript shown in buffer `buf`, if it is one.
function M.transcript_of(buf)
  for _, conv in pairs(by_session) do
    if conv.transcript.buf == buf then
      return conv.transcript
    end
  end
  return current and current.transcript.buf == buf and current.transcript or nil
end

client.handlers[methods.TURN_EVENT] = function(params)
  local conv = by_session[params.sessionId]
  if not conv then
    return
  end
  local ev = type(params.event) == 'table' and params.event or {}
  local live = not conv.replaying and turn and turn.conversation == conv
  if ev.kind == 'turnStarted' then
    if conv.claim and not conv.replaying then
      conv.claim = false
    else
      conv.transcript:begin_turn(ev.prompt or '', {})
    end
    if live then
      turn.id = params.turnId
      if turn.cancelled then -- a queued prompt that started after the turn was cancelled
        client.notify(methods.TURN_CANCEL, { sessionId = conv.id, turnId = params.turnId })
      end
    end
  elseif ev.kind == 'turnEnded' then
    if not conv.ended[params.turnId] then
      conv.ended[params.turnId] = true
      conv.transcript:end_turn(ev)
    end
  elseif ev.kind == 'usage' then
    if type(ev.contextTokens) == 'number' and type(ev.contextWindow) == 'number' then
      conv.context = { tokens = ev.contextTokens, window = ev.contextWindow }
    end
  else
    conv.transcript:event(ev)
  end
  if ev.kind == 'toolCallFinished' and not conv.replaying then
    edits.finished(ev)
  elseif ev.kind == 'permissionAnswered' and not conv.replaying then
    review.decided(ev.toolCallId)
  elseif ev.kind == 'modeChanged' and conv.info and type(ev.mode) == 'string' then
    conv.info.permissionMode = ev.mode -- an approved plan: the session goes on in this mode
  end
end

client.handlers[methods.PERMISSION_REQUEST] = function(params)
  local conv = by_session[params.sessionId]
  local t = turn
  if not conv or not t or t.conversation ~= conv or t.cancelled then
    return { decision = 'reject', message = 'The turn was cancelled.' }
  end
  if not params.loop then -- the repeat guard's question: its call has ended, its notice is shown
    conv.transcript:permission_asked(params.toolCallId, params.title, params.preview)
  end
  show(conv)
  t.waiting = true
  local ok, result = pcall(permission.ask, params)
  t.waiting = false
  if not ok then
    notify(tostring(result), vim.log.levels.ERROR)
    return { decision = 'reject', message = 'The permission prompt failed.' }
  end
  if type(result) == 'table' and result.decision == 'reject' and type(result.message) == 'string' then
    conv.transcript:update_tool(params.toolCallId, { reason = result.message })
  end
  return result
end

client.on_exit = function(reason, clean)
  for id, conv in pairs(by_session) do
    conv.unloaded = true
    by_session[id] = nil
  end
  for _, conv in ipairs(conversations) do -- a close the daemon did not answer: it is gone
    local waiting = conv.closing or {}
    conv.closing = nil
    for _, fn in ipairs(waiting) do
      fn()
    end
  end
  local t = turn
  if t then
    t.conversation.transcript:end_turn(nil, { message = reason })
    t.failed = true
    last = { error = { message = reason } }
    t.requests = 0
    settle(t, true)
  end
  if current and current.id and not clean then
    current.transcript:note(reason .. '; the next prompt resumes this session')
  end
end

return M
