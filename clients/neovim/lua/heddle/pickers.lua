--- The pickers of `:AgentSessions`, `:AgentRules`, `:AgentMode` and `:AgentModel`, all through
--- `vim.ui.select` / `vim.ui.input`, so the user's picker plugin asks.
local client = require('heddle.client')
local protocol = require('heddle.protocol')
local session = require('heddle.session')

local methods = protocol.methods
local M = {}

M.MODES = { 'default', 'acceptEdits', 'plan', 'bypassPermissions' }

local function notify(message, level)
  vim.notify('heddle: ' .. message, level or vim.log.levels.INFO)
end

--- `2026-11-30T09:13:40+00:00` as `2026-11-30 09:13` (UTC, as the daemon keeps it).
local function when(iso)
  return type(iso) == 'string' and (iso:sub(1, 16):gsub('T', ' ')) or '?'
end

--- One line of the sessions list: title, last activity, how its last turn ended.
function M.session_line(s)
  local title = (s.title or '') ~= '' and s.title or '(no prompt yet)'
  local reason = s.lastReason or (s.turns > 0 and 'interrupted' or 'no turns')
  return ('%s · %s · %s%s'):format(title, when(s.updatedAt), reason,
    s.sessionId == session.status().session_id and ' (current)' or '')
end

--- Lists the workspace's sessions; the one chosen is resumed.
function M.sessions()
  session.list(function(sessions)
    if #sessions == 0 then
      return notify('no sessions in this workspace yet')
    end
    vim.ui.select(sessions, {
      prompt = 'Heddle sessions',
      kind = 'heddle.sessions',
      format_item = M.session_line,
    }, function(choice)
      if choice then
        session.resume(choice.sessionId)
      end
    end)
  end)
end

--- Resumes session `id`, or the workspace's latest one that is not the current session.
function M.resume(id)
  if id and id ~= '' then
    return session.resume(id)
  end
  session.list(function(sessions)
    local mine = session.status().session_id
    for _, s in ipairs(sessions) do
      if s.sessionId ~= mine then
        return session.resume(s.sessionId)
      end
    end
    notify('no other session in this workspace to resume')
  end)
end

--- Lists the permission rules the current session applies; the one chosen is revoked.
function M.rules()
  session.with_live_session(function(conv)
    client.request(methods.RULES_LIST, { sessionId = conv.id }, function(err, result)
      if err then
        return notify('could not list rules: ' .. (err.message or ''), vim.log.levels.ERROR)
      end
      local rules = result.rules or {}
      if #rules == 0 then
        return notify('no permission rules apply to this session')
      end
      vim.ui.select(rules, {
        prompt = 'Heddle rules (choose one to revoke)',
        kind = 'heddle.rules',
        format_item = function(r)
          return ('%s %s (%s)'):format(r.kind, r.rule, r.scope)
        end,
      }, function(choice)
        if not choice then
          return
        end
        local params = { sessionId = conv.id, rule = choice.rule, kind = choice.kind,
                         scope = choice.scope }
        client.request(methods.RULES_REVOKE, params, function(rerr, revoked)
          if rerr then
            return notify('could not revoke ' .. choice.rule .. ': ' .. (rerr.message or ''),
              vim.log.levels.ERROR)
          end
          local n = #(revoked.revoked or {})
          notify(('revoked %s %s (%s)%s'):format(choice.kind, choice.rule, choice.scope,
            n == 0 and ': it was gone already' or ''))
        end)
      end)
    end)
  end)
end

--- Sets the permission mode of the current session from its next turn; asks without `mode`.
function M.mode(mode)
  if mode and mode ~= '' then
    if not vim.tbl_contains(M.MODES, mode) then
      return notify(('unknown mode %q: one of %s'):format(mode, table.concat(M.MODES, ', ')),
        vim.log.levels.ERROR)
    end
    return session.configure({ permissionMode = mode })
  end
  local now = session.status().mode
  vim.ui.select(M.MODES, {
    prompt = 'Heddle permission mode',
    kind = 'heddle.mode',
    format_item = function(m)
      return m == now and m .. ' (current)' or m
    end,
  }, function(choice)
    if choice then
      session.configure({ permissionMode = choice })
    end
  end)
end

--- Sets the model of the current session from its next turn; asks without `model`.
function M.model(model)
  if model and model ~= '' then
    return session.configure({ model = model })
  end
  vim.ui.input({ prompt = 'Heddle model: ', default = session.status().model }, function(input)
    if input and vim.trim(input) ~= '' then
      session.configure({ model = vim.trim(input) })
    end
  end)
end

return M
