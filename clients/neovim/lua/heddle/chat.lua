--- The chat: the output window of the current conversation and a prompt window under it, as
--- a split beside the code or a float over it (`window.layout`), with the chat's keymaps.
---
--- The prompt is a scratch buffer shared by every conversation: type a follow-up, then `<CR>`
--- in normal mode sends it (queued while a turn runs; `<M-CR>` steers). The keys are
--- `<Plug>` mappings (plugin/heddle.lua defines them), set buffer-locally from `keys`.
local config = require('heddle.config')

local M = {}
local api = vim.api

local input = nil ---@type integer? the prompt buffer

local function is_chat_buf(buf)
  return api.nvim_buf_is_valid(buf) and (vim.b[buf].heddle_output == true or buf == input)
end

--- Sets the `keys` that apply in `buf`; `which` lists the names (and their modes).
local function map_keys(buf, which)
  local keys = config.options.keys
  for name, modes in pairs(which) do
    local lhs = keys[name]
    if lhs then
      vim.keymap.set(modes, lhs, ('<Plug>(heddle-%s)'):format(name:gsub('_', '-')),
        { buffer = buf, remap = true, desc = 'Heddle: ' .. name:gsub('_', ' ') })
    end
  end
end

--- Marks `buf` as a chat output buffer and sets its keys.
function M.attach_output(buf)
  vim.b[buf].heddle_output = true
  map_keys(buf, { close = 'n', cancel = 'n', toggle_output = 'n' })
end

--- The prompt buffer, made on first use.
function M.input_buffer()
  if input and api.nvim_buf_is_valid(input) then
    return input
  end
  input = api.nvim_create_buf(false, true)
  local bo = vim.bo[input]
  bo.buftype = 'nofile'
  bo.bufhidden = 'hide'
  bo.swapfile = false
  pcall(api.nvim_buf_set_name, input, 'heddle://prompt')
  bo.filetype = 'heddle_prompt'
  map_keys(input, { send = 'n', steer = 'n', close = 'n', cancel = { 'n', 'i' } })
  return input
end

local function tab_window(buf)
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == buf then
      return win
    end
  end
  return nil
end

local function style(win)
  local wo = vim.wo[win]
  wo.wrap = true
  wo.linebreak = true
  wo.number = false
  wo.relativenumber = false
  wo.signcolumn = 'no'
  wo.foldenable = false
end

local function cells(size, total)
  return math.max(1, size < 1 and math.floor(total * size) or math.floor(size))
end

--- Opens (or finds) the output window of `buf`, reusing a window that shows `replaces`.
local function output_window(buf, replaces, w)
  local win = tab_window(buf)
  if not win and replaces then
    win = tab_window(replaces)
    if win then
      api.nvim_win_set_buf(win, buf)
    end
  end
  if win then
    return win
  end
  if w.layout == 'float' then
    local width = cells(w.size, vim.o.columns - 4)
    local height = math.max(3, math.floor((vim.o.lines - 2) * 0.8) - w.input_height - 2)
    win = api.nvim_open_win(buf, false, {
      relative = 'editor',
      row = math.max(0, math.floor((vim.o.lines - height - w.input_height - 4) / 2)),
      col = math.floor((vim.o.columns - width) / 2),
      width = width,
      height = height,
      border = 'rounded',
      title = ' Heddle ',
      style = 'minimal',
    })
  else
    local vertical = w.position == 'left' or w.position == 'right'
    local size = cells(w.size, vertical and vim.o.columns or vim.o.lines)
    win = api.nvim_open_win(buf, false, {
      split = w.position,
      win = -1,
      width = vertical and size or nil,
      height = (not vertical) and size or nil,
    })
  end
  style(win)
  api.nvim_win_set_cursor(win, { api.nvim_buf_line_count(buf), 0 })
  return win
end

--- Opens the prompt window under the output window `out`, unless one is open.
local function input_window(out, w)
  local buf = M.input_buffer()
  local win = tab_window(buf)
  if win or w.input_height == 0 then
    return win
  end
  if w.layout == 'float' then
    local cfg = api.nvim_win_get_config(out)
    local row = type(cfg.row) == 'table' and cfg.row[false] or cfg.row
    win = api.nvim_open_win(buf, false, {
      relative = 'editor',
      row = row + cfg.height + 2,
      col = type(cfg.col) == 'table' and cfg.col[false] or cfg.col,
      width = cfg.width,
      height = w.input_height,
      border = 'rounded',
      title = ' prompt: <CR> sends, q closes ',
      style = 'minimal',
    })
  else
    win = api.nvim_open_win(buf, false, { split = 'below', win = out, height = w.input_height })
  end
  style(win)
  vim.wo[win].winfixheight = true
  return win
end

--- Shows the chat for `transcript` and returns its output window.
--- @param opts { enter: boolean?, replaces: integer? } `replaces`: a previous output buffer
function M.show(transcript, opts)
  if not transcript:valid() then
    transcript:_edit(function() end)
  end
  local w = config.options.window
  local out = output_window(transcript.buf, opts.replaces, w)
  input_window(out, w)
  local enter = opts.enter
  if enter == nil then
    enter = w.enter
  end
  if enter then
    api.nvim_set_current_win(out)
  end
  return out
end

--- The chat's windows in the current tab page.
function M.windows()
  local found = {}
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if is_chat_buf(api.nvim_win_get_buf(win)) then
      table.insert(found, win)
    end
  end
  return found
end

--- Closes the chat's windows (the conversation goes on; `:AgentToggle` shows it again).
function M.hide()
  local wins = M.windows()
  if #wins >= #api.nvim_tabpage_list_wins(0) then
    vim.cmd.new() -- the chat is all there is: keep a window for the code
  end
  for _, win in ipairs(wins) do
    if api.nvim_win_is_valid(win) then
      api.nvim_win_close(win, true)
    end
  end
end

--- The buffer whose file goes along with a prompt sent from the chat: the first window of the
--- tab page that shows a file.
local function code_buffer()
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    local buf = api.nvim_win_get_buf(win)
    if vim.bo[buf].buftype == '' and not is_chat_buf(buf) then
      return buf
    end
  end
  return nil
end

--- Sends what the prompt holds (steering the running turn with `steer`); returns false if
--- it is empty.
function M.send(steer)
  local buf = M.input_buffer()
  local text = vim.trim(table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n'))
  if text == '' then
    return false
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, { '' })
  require('heddle').run(text, { buf = code_buffer() or buf, steer = steer })
  return true
end

--- Shows or hides all of a command's long output under the cursor.
function M.toggle_output()
  local session = require('heddle.session')
  local t = session.transcript_of(api.nvim_get_current_buf())
  return t ~= nil and t:toggle_output(api.nvim_win_get_cursor(0)[1] - 1)
end

return M
