--- Answers `permission/request` through `vim.ui.select` and `vim.ui.input`, so whatever picker
--- the user has installed (Telescope, fzf-lua, snacks, ...) asks the question.
---
--- The daemon's request handler runs inside a coroutine (Neovim's RPC layer wraps server
--- requests in one), so `ask()` yields until the user answers and then returns the result.
--- Outside a coroutine it falls back to the blocking `inputlist()` and `input()`.
---
--- An edit whose preview carries the texts and hunks is shown in `heddle.review` first (drawn
--- before the picker opens); the picker then offers to review it there, hunk by hunk, and
--- dismissing the picker leaves the review open for `:AgentAccept` / `:AgentReject`.
local review = require('heddle.review')

local M = {}

local REVIEW = { decision = 'review', label = 'Review in the diff (hunk by hunk, or edit it)' }

local default_options = {
  { decision = 'allowOnce', label = 'Allow once' },
  { decision = 'allowAlways', label = 'Always allow' },
  { decision = 'reject', label = 'Reject' },
}

--- Calls `start(done)` and waits, without blocking the editor, until `done(value)` is called.
--- Returns nil, false when not running in a coroutine (then nothing was started).
local function await(start)
  local co, is_main = coroutine.running()
  if not co or is_main then
    return nil, false
  end
  start(function(value)
    vim.schedule(function()
      coroutine.resume(co, value)
    end)
  end)
  return coroutine.yield(), true
end

--- The same questions asked synchronously, for a Neovim that calls server-request handlers
--- outside a coroutine.
local function ask_blocking(params, options)
  local lines = { ('Heddle: %s'):format(params.title or params.tool or 'run a tool') }
  for i, option in ipairs(options) do
    table.insert(lines, ('%d. %s'):format(i, M.format(option)))
  end
  local choice = options[vim.fn.inputlist(lines)]
  local message = nil
  if choice and choice.decision == 'reject' and not params.loop then
    message = vim.fn.input('Tell Heddle why (optional): ')
  end
  return choice, message
end

--- How an option reads in the picker; `Always allow` shows the rule it would save (the
--- daemon's label may name it already).
function M.format(option)
  local rule = option.decision == 'allowAlways' and option.rule
  if rule and not option.label:find(rule, 1, true) then
    return ('%s: %s'):format(option.label, option.rule)
  end
  return option.label
end

local function trimmed(message)
  if type(message) == 'string' and vim.trim(message) ~= '' then
    return vim.trim(message)
  end
  return nil
end

--- Shows the review of an edit, then asks; the answer comes from the picker or, once the user
--- chose to review (or dismissed the picker), from the review's keymaps and commands.
local function ask_with_review(params, options)
  -- One review at a time: a second edit waits until the first is answered.
  await(function(done)
    review.when_closed(done)
  end)
  return await(function(done)
    local r = review.open(params, done)
    vim.cmd.redraw()
    local choices = vim.list_extend(vim.deepcopy(options), { REVIEW })
    vim.ui.select(choices, {
      prompt = ('Heddle: %s'):format(params.title or params.tool or 'run a tool'),
      format_item = M.format,
      kind = 'heddle.permission',
    }, function(choice)
      if r.answered then
        return
      elseif choice == nil or choice.decision == 'review' then
        vim.notify(
          'heddle: review the change; :AgentAccept or :AgentReject answers',
          vim.log.levels.INFO
        )
      elseif choice.decision == 'reject' then
        vim.ui.input({ prompt = 'Tell Heddle why (optional): ' }, function(message)
          r:answer({ decision = 'reject', message = trimmed(message) })
        end)
      else
        r:answer(r:allow(choice.decision, choice.decision == 'allowAlways' and choice.rule or nil))
      end
    end)
  end)
end

--- A floating window with the plan (Markdown) to approve, shown while the picker asks; returns
--- the function that closes it.
local function show_plan(plan)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(plan, '\n', { plain = true }))
  vim.bo[buf].filetype = 'markdown'
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  local width = math.max(20, math.min(100, vim.o.columns - 4))
  local height = math.max(1, math.min(vim.api.nvim_buf_line_count(buf), vim.o.lines - 8))
  local win = vim.api.nvim_open_win(buf, false, {
    relative = 'editor',
    width = width,
    height = height,
    row = 1,
    col = math.floor((vim.o.columns - width) / 2),
    style = 'minimal',
    border = 'rounded',
    title = ' Heddle: the plan ',
    title_pos = 'center',
  })
  vim.wo[win].wrap = true
  vim.wo[win].conceallevel = 2
  vim.cmd.redraw()
  return function()
    if vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_close(win, true)
    end
  end
end

--- Asks about a plan (`preview.kind` `plan`): shown in a floating window, approved with the
--- mode the session goes on in (the options' `mode`), or rejected with feedback for the agent.
local function ask_plan(params, options)
  local close = show_plan(params.preview.plan)
  local prompt = ('Heddle: %s'):format(params.title or 'Plan')
  local choice, asked = await(function(done)
    vim.ui.select(options, { prompt = prompt, format_item = M.format, kind = 'heddle.plan' }, done)
  end)
  local message = nil
  if not asked then
    choice, message = ask_blocking(params, options)
  end
  local result
  if choice == nil then
    result = { decision = 'reject' } -- dismissed: keep planning, without a comment
  elseif choice.decision == 'reject' then
    if asked then
      message = await(function(done)
        vim.ui.input({ prompt = 'What should change in the plan? ' }, done)
      end)
    end
    result = { decision = 'reject', message = trimmed(message) }
  else
    result = { decision = choice.decision, mode = choice.mode }
  end
  close()
  return result
end

--- Asks the user about one tool call and returns the `permission/request` result.
--- @param params table `permission/request` params
--- @return table result `{ decision, rule?, message?, hunks?, finalText?, mode? }`
function M.ask(params)
  local options = params.options
  if type(options) ~= 'table' or #options == 0 then
    options = default_options
  end
  if type(params.preview) == 'table' and params.preview.kind == 'plan'
      and type(params.preview.plan) == 'string' then
    return ask_plan(params, options)
  end
  local co, is_main = coroutine.running()
  if co and not is_main and review.supported(params.preview) then
    return (ask_with_review(params, options))
  end
  local choice, asked = await(function(done)
    vim.ui.select(options, {
      prompt = ('Heddle: %s'):format(params.title or params.tool or 'run a tool'),
      format_item = M.format,
      kind = 'heddle.permission',
    }, done)
  end)
  local message = nil
  if not asked then
    choice, message = ask_blocking(params, options)
  end
  if choice == nil then
    return { decision = 'reject', message = 'The user dismissed the permission prompt.' }
  elseif params.loop then -- the repeat guard's question: go on, or stop the turn
    return { decision = choice.decision }
  end
  local result = { decision = choice.decision }
  if choice.decision == 'allowAlways' and choice.rule then
    result.rule = choice.rule
  elseif choice.decision == 'reject' then
    if asked then
      message = await(function(done)
        vim.ui.input({ prompt = 'Tell Heddle why (optional): ' }, done)
      end)
    end
    result.message = trimmed(message)
  end
  return result
end

return M
