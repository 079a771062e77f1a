-- Test init for a headless Neovim. The plugin is installed as a native package by the test
-- fixture; this file only replaces vim.ui.select and vim.ui.input with stand-ins that record
-- what was asked and answer from a queue the test fills, and records what vim.notify was given
-- (then shows it as usual). Everything else is the real editor, the real plugin and the real
-- daemon.
vim.o.columns = 160
vim.o.lines = 50

--- The review on screen (heddle.review), if any: is it drawn, and what does its proposal hold.
local function review()
  local ok, mod = pcall(require, 'heddle.review')
  local r = ok and mod.active()
  if not r then
    return { open = false }
  end
  return {
    open = #vim.fn.win_findbuf(r.before) > 0 and #vim.fn.win_findbuf(r.proposal) > 0,
    diff = vim.wo[vim.fn.win_findbuf(r.proposal)[1] or 0].diff,
    proposal = vim.api.nvim_buf_get_lines(r.proposal, 0, -1, false),
  }
end

--- The floating windows on screen: their title and lines.
local function floats()
  local found = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local config = vim.api.nvim_win_get_config(win)
    if config.relative ~= '' then
      local title = config.title
      if type(title) == 'table' then -- { { text, hl }, ... }
        title = table.concat(vim.tbl_map(function(chunk)
          return chunk[1]
        end, title))
      end
      table.insert(found, {
        title = title or '',
        lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false),
        filetype = vim.bo[vim.api.nvim_win_get_buf(win)].filetype,
      })
    end
  end
  return found
end

local function transcript()
  local ok, heddle = pcall(require, 'heddle')
  local buf = ok and heddle.status().buf
  if buf and vim.api.nvim_buf_is_valid(buf) then
    return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  end
  return {}
end

_G.T = {
  -- What the pickers were asked: { prompt, kind, items, transcript } per call.
  selects = {},
  inputs = {},
  -- Answers, consumed in order: for selects a decision name or item (a string), or the index
  -- of the item (nil: dismiss; 'hold': keep the picker open until the test calls
  -- T.choose(decision)), text for inputs.
  select_answers = {},
  input_answers = {},
  -- What vim.notify was given: { message, level } per call.
  notes = {},
}

local notify = vim.notify
vim.notify = function(message, level, opts)
  table.insert(T.notes, { message = message, level = level or vim.log.levels.INFO })
  return notify(message, level, opts)
end

-- Neovim's own picker (inputlist), for a test that uses it.
T.stock_select = vim.ui.select
T.review = review
T.floats = floats

vim.ui.select = function(items, opts, on_choice)
  local shown = {}
  for i, item in ipairs(items) do
    shown[i] = opts.format_item and opts.format_item(item) or tostring(item)
  end
  table.insert(T.selects, {
    prompt = opts.prompt,
    kind = opts.kind,
    items = shown,
    transcript = transcript(),
    state = require('heddle').status().state,
    review = review(),
    floats = floats(),
  })
  local function choose(answer)
    if type(answer) == 'number' then -- the answer-th item (sessions, rules)
      return on_choice(items[answer], items[answer] and answer or nil)
    end
    for i, item in ipairs(items) do
      if (type(item) == 'table' and item.decision == answer) or item == answer then
        return on_choice(item, i)
      end
    end
    on_choice(nil)
  end
  local answer = table.remove(T.select_answers, 1)
  if answer == 'hold' then
    T.choose = choose
    return
  end
  choose(answer)
end

vim.ui.input = function(opts, on_confirm)
  table.insert(T.inputs, { prompt = opts.prompt })
  on_confirm(table.remove(T.input_answers, 1))
end
