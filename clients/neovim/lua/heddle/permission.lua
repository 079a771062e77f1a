--- Answers `permission/request` through `vim.ui.select` and `vim.ui.input`, so whatever picker
--- the user has installed (Telescope, fzf-lua, snacks, ...) asks the question.
---
--- The daemon's request handler runs inside a coroutine (Neovim's RPC layer wraps server
--- requests in one), so `ask()` yields until the user answers and then returns the result.
local M = {}

local default_options = {
  { decision = 'allowOnce', label = 'Allow once' },
  { decision = 'allowAlways', label = 'Always allow' },
  { decision = 'reject', label = 'Reject' },
}

--- Calls `start(done)` and waits, without blocking the editor, until `done(value)` is called.
local function await(start)
  local co, is_main = coroutine.running()
  if not co or is_main then
    error('heddle: permission prompts must run inside a coroutine')
  end
  start(function(value)
    vim.schedule(function()
      coroutine.resume(co, value)
    end)
  end)
  return coroutine.yield()
end

--- How an option reads in the picker; `Always allow` shows the rule it would save (the
--- daemon's label may name it already).
function M.format(option)
  if option.decision == 'allowAlways' and option.rule and not option.label:find(option.rule, 1, true) then
    return ('%s: %s'):format(option.label, option.rule)
  end
  return option.label
end

--- Asks the user about one tool call and returns the `permission/request` result.
--- @param params table `permission/request` params
--- @return table result `{ decision, rule?, message? }`
function M.ask(params)
  local options = params.options
  if type(options) ~= 'table' or #options == 0 then
    options = default_options
  end
  local choice = await(function(done)
    vim.ui.select(options, {
      prompt = ('Heddle: %s'):format(params.title or params.tool or 'run a tool'),
      format_item = M.format,
      kind = 'heddle.permission',
    }, done)
  end)
  if choice == nil then
    return { decision = 'reject', message = 'The user dismissed the permission prompt.' }
  end
  local result = { decision = choice.decision }
  if choice.decision == 'allowAlways' and choice.rule then
    result.rule = choice.rule
  elseif choice.decision == 'reject' then
    local message = await(function(done)
      vim.ui.input({ prompt = 'Tell Heddle why (optional): ' }, done)
    end)
    if type(message) == 'string' and vim.trim(message) ~= '' then
      result.message = vim.trim(message)
    end
  end
  return result
end

return M
