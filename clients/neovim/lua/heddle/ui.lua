--- The output buffer: a markdown transcript of one session, written as the daemon works.
---
--- Streamed text is batched and written at most every few milliseconds, so a fast stream
--- costs a handful of buffer updates rather than one per delta. Each tool call is one line,
--- found again through an extmark, that is rewritten in place as its status changes; its
--- diff or command preview sits in the lines just below it. Windows whose cursor is on the
--- last line keep following the tail; a user who moved away is left alone. A command's output
--- sits under its call, its tail shown (all of it on request); diffs are coloured with
--- extmarks, not by markdown, which would paint the `_` in snake_case names as errors.
local config = require('heddle.config')
local format = require('heddle.format')

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('heddle')
local ns_hl = api.nvim_create_namespace('heddle.highlight')
local FLUSH_MS = 20

-- Highlight groups of the status marks; `default`, so a colorscheme or the user may set them.
for group, link in pairs({
  HeddleToolRunning = 'Comment',
  HeddleToolWaiting = 'DiagnosticWarn',
  HeddleToolOk = 'DiagnosticOk',
  HeddleToolError = 'DiagnosticError',
  HeddleToolRejected = 'DiagnosticWarn',
  HeddleOutput = 'Comment',
  HeddleThinking = 'Comment',
  HeddleDiffAdd = 'DiffAdd',
  HeddleDiffDelete = 'DiffDelete',
  HeddleDiffHunk = 'DiffText',
}) do
  api.nvim_set_hl(0, group, { link = link, default = true })
end

---@class heddle.Transcript
---@field buf integer
---@field tools table<string, table>
---@field tail 'empty'|'header'|'text'|'item'|'footer'
local Transcript = {}
Transcript.__index = Transcript

local function new_buffer(name)
  local buf = api.nvim_create_buf(false, true)
  local bo = vim.bo[buf]
  bo.buftype = 'nofile'
  bo.bufhidden = 'hide'
  bo.swapfile = false
  bo.undolevels = -1
  pcall(api.nvim_buf_set_name, buf, name)
  bo.filetype = 'markdown'
  -- Markdown's syntax marks an `_` inside a word as an error (red): every snake_case name the
  -- agent mentions would be painted so.
  api.nvim_buf_call(buf, function()
    vim.cmd('silent! syntax clear markdownError')
  end)
  bo.modifiable = false
  require('heddle.chat').attach_output(buf)
  return buf
end

--- A new, empty transcript in a scratch buffer called `name`.
--- @return heddle.Transcript
function M.new(name)
  local self = setmetatable({ name = name, pending = {}, flush_scheduled = false }, Transcript)
  self:_reset()
  return self
end

function Transcript:_reset()
  self.buf = new_buffer(self.name)
  self.tools = {} -- tool call id -> { title, status, summary, rule?, details, mark }
  self.dropped = {} -- ids of tool calls whose lines a tombstone removed
  self.calls = {} -- model call index -> { mark, tail, text_start, tools }
  self.call = nil -- the model call whose output is being written
  self.thought = nil -- the id of the thinking being streamed, until something else comes
  self.thoughts = 0
  self.tail = 'empty'
  self.text_start = 0
end

--- Empties the transcript (its buffer is kept), before a session's history is replayed into it.
function Transcript:clear()
  self.pending = {}
  if self:valid() then
    api.nvim_buf_clear_namespace(self.buf, ns, 0, -1)
    api.nvim_buf_clear_namespace(self.buf, ns_hl, 0, -1)
    self:_edit(function(buf)
      api.nvim_buf_set_lines(buf, 0, -1, false, {})
    end)
  end
  self.tools, self.dropped, self.calls, self.call, self.thought = {}, {}, {}, nil, nil
  self.tail, self.text_start = 'empty', 0
end

function Transcript:valid()
  return api.nvim_buf_is_valid(self.buf)
end

-- Writing ------------------------------------------------------------------------------------

--- Runs `fn()` with the buffer modifiable, then moves windows that were at the tail to the new end.
function Transcript:_edit(fn)
  if not self:valid() then
    self.name = self.name .. '+'
    self:_reset()
  end
  local buf = self.buf
  local last = api.nvim_buf_line_count(buf)
  local following = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if api.nvim_win_get_cursor(win)[1] >= last then
      table.insert(following, win)
    end
  end
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn, buf)
  vim.bo[buf].modifiable = false
  local new_last = api.nvim_buf_line_count(buf)
  for _, win in ipairs(following) do
    api.nvim_win_set_cursor(win, { new_last, 0 })
  end
  if not ok then
    error(err, 0)
  end
end

function Transcript:_append(buf, lines)
  if self.tail == 'empty' then
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  else
    api.nvim_buf_set_lines(buf, -1, -1, false, lines)
  end
end

--- Appends whole lines of one kind, with a blank line between different kinds.
function Transcript:_block(kind, lines)
  self:flush()
  self:_edit(function(buf)
    if self.tail == 'text' then
      -- Drop blank lines the text ended with, so exactly one separates it from the block.
      local count = api.nvim_buf_line_count(buf)
      local function last_is_blank()
        return api.nvim_buf_get_lines(buf, count - 1, count, false)[1] == ''
      end
      while count > self.text_start + 1 and last_is_blank() do
        api.nvim_buf_set_lines(buf, count - 1, count, false, {})
        count = count - 1
      end
    end
    local out = {}
    if self.tail ~= 'empty' and not (self.tail == 'item' and kind == 'item') then
      table.insert(out, '')
    end
    vim.list_extend(out, lines)
    self:_append(buf, out)
  end)
  self.tail = kind
  return api.nvim_buf_line_count(self.buf) - #lines
end

function Transcript:_write_text(text)
  if self.tail ~= 'text' then
    text = text:gsub('^\n+', '')
    if text == '' then
      return
    end
  end
  self.thought = nil
  self:_edit(function(buf)
    if self.tail ~= 'text' then
      self:_append(buf, self.tail == 'empty' and { '' } or { '', '' })
      self.text_start = api.nvim_buf_line_count(buf) - 1
      self.tail = 'text'
    end
    local row = api.nvim_buf_line_count(buf) - 1
    local col = #api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
    api.nvim_buf_set_text(buf, row, col, row, col, vim.split(text, '\n', { plain = true }))
  end)
end

--- Queues streamed text; it is written within FLUSH_MS, or by the next flush().
function Transcript:text(text)
  table.insert(self.pending, text)
  if not self.flush_scheduled then
    self.flush_scheduled = true
    vim.defer_fn(function()
      self:flush()
    end, FLUSH_MS)
  end
end

--- Writes queued text now.
function Transcript:flush()
  self.flush_scheduled = false
  if #self.pending == 0 then
    return
  end
  local text = table.concat(self.pending)
  self.pending = {}
  self:_write_text(text)
end

-- Turns --------------------------------------------------------------------------------------

--- Shows the prompt that starts a turn, and what went with it.
--- @param prompt string
--- @param context table[] context items as sent to the daemon
function Transcript:begin_turn(prompt, context)
  self:_block('header', format.turn_header(prompt, context))
end

--- Ends a turn with the result of `turn/start`, or the error it failed with.
function Transcript:end_turn(result, err)
  self:flush()
  for id, tool in pairs(self.tools) do
    if tool.status == 'running' or tool.status == 'waiting' then
      self:update_tool(id, { status = 'cancelled', summary = '' })
    end
  end
  -- Model call indices start again at 0 in the next turn.
  self.call, self.calls, self.thought = nil, {}, nil
  self:_block('footer', { format.footer(result, err) })
end

--- An informational line, e.g. that the daemon exited.
function Transcript:note(text)
  self:_block('item', { ('- %s'):format(text) })
end

-- Model calls --------------------------------------------------------------------------------

--- Remembers where the output of model call `index` starts, so a tombstone can remove it.
function Transcript:begin_call(index)
  self:flush()
  self.thought = nil
  self:_edit(function() end) -- recreates a wiped buffer before the mark goes in
  local row = api.nvim_buf_line_count(self.buf) - 1
  local col = #api.nvim_buf_get_lines(self.buf, row, row + 1, false)[1]
  self.call = {
    mark = api.nvim_buf_set_extmark(self.buf, ns, row, col, { right_gravity = false }),
    tail = self.tail,
    text_start = self.text_start,
    tools = {},
  }
  self.calls[index] = self.call
end

--- Removes everything model call `index` wrote (it is being redone); returns false if unknown.
function Transcript:drop_call(index)
  self:flush()
  local call = self.calls[index]
  if not call then
    return false
  end
  for _, id in ipairs(call.tools) do
    self.tools[id] = nil
    self.dropped[id] = true
  end
  self:_edit(function(buf)
    local pos = api.nvim_buf_get_extmark_by_id(buf, ns, call.mark, {})
    local last = api.nvim_buf_line_count(buf) - 1
    local last_col = #api.nvim_buf_get_lines(buf, last, last + 1, false)[1]
    api.nvim_buf_set_text(buf, pos[1], pos[2], last, last_col, {})
  end)
  self.tail, self.text_start = call.tail, call.text_start
  self.calls[index], self.call = nil, nil
  return true
end

-- Tool calls ---------------------------------------------------------------------------------

--- The tool call `id`, with a line added for it if it has none yet; nil if it was dropped.
function Transcript:tool(id, name)
  local tool = self.tools[id]
  if tool or self.dropped[id] then
    return tool
  end
  if id ~= self.thought then
    self.thought = nil -- a tool call after thinking ends it
  end
  tool = { id = id, title = name or 'tool', status = 'running', summary = '', details = 0 }
  local row = self:_block('item', { format.tool_line(tool) })
  tool.mark = api.nvim_buf_set_extmark(self.buf, ns, row, 0, { right_gravity = false })
  self:_highlight(tool, row)
  -- After _block: if the buffer had been wiped, _block started a new one with no tools.
  self.tools[id] = tool
  if self.call then
    table.insert(self.call.tools, id)
  end
  return tool
end

function Transcript:_tool_row(tool)
  return api.nvim_buf_get_extmark_by_id(self.buf, ns, tool.mark, {})[1]
end

--- Colours the status mark of the tool call on `row` (the mark starts after `- `).
function Transcript:_highlight(tool, row)
  api.nvim_buf_clear_namespace(self.buf, ns_hl, row, row + 1)
  api.nvim_buf_set_extmark(self.buf, ns_hl, row, 2, {
    end_col = 2 + #format.icons[tool.status],
    hl_group = format.groups[tool.status],
  })
end

--- Colours the lines below a tool call: diff lines by what they do, output as output.
function Transcript:_highlight_details(row, lines)
  local in_diff = false
  for i, line in ipairs(lines) do
    local group = nil
    if line:match('^  ```') then
      in_diff = line == '  ```diff'
    elseif in_diff then
      local first = line:sub(3, 3)
      group = (line:sub(3, 4) == '@@' and 'HeddleDiffHunk') or (first == '+' and 'HeddleDiffAdd')
        or (first == '-' and 'HeddleDiffDelete') or nil
    elseif format.is_output(line) then
      group = 'HeddleOutput'
    end
    -- Marks end on their own line: one reaching into the next line would be cleared with it.
    if group == 'HeddleOutput' then
      api.nvim_buf_set_extmark(self.buf, ns_hl, row + i - 1, 0, { end_col = #line, hl_group = group })
    elseif group then
      api.nvim_buf_set_extmark(self.buf, ns_hl, row + i - 1, 0, { line_hl_group = group })
    end
  end
end

--- Lines of a call's output (or of thinking) shown when it is not expanded.
local function shown(tool)
  return tool.status == 'thinking' and config.options.output.thinking
    or config.options.output.lines
end

--- Adds streamed thinking (a `thinkingDelta`) under a `- ✻ thinking` line of its own, dimmed,
--- with its last `output.thinking` lines shown (all of it on <Tab>). Text, a tool call or a
--- new model call after it ends it: more thinking then gets a line of its own.
function Transcript:thinking(text)
  if type(text) ~= 'string' or text == '' then
    return
  end
  self:flush()
  if not self.thought then
    self.thoughts = self.thoughts + 1
    self.thought = ('thinking:%d'):format(self.thoughts)
  end
  local id = self.thought
  if not self:tool(id, 'thinking') then
    return
  end
  format.add_output(self.tools[id], text, 0)
  self:update_tool(id, { status = 'thinking' })
end

--- Changes fields of a tool call and rewrites its line; `details` replaces the preview (or
--- diff) below it. The command output under it is written again from what it kept.
function Transcript:update_tool(id, fields, details)
  self:flush()
  local tool = self:tool(id, fields.title)
  if not tool then
    return
  end
  for key, value in pairs(fields) do
    tool[key] = value
  end
  if details then
    tool.preview_lines = details
  end
  local lines = vim.list_extend(vim.list_extend({}, tool.preview_lines or {}),
    format.output_lines(tool, shown(tool)))
  self:_edit(function(buf)
    local row = self:_tool_row(tool)
    api.nvim_buf_clear_namespace(buf, ns_hl, row, row + 1 + tool.details)
    api.nvim_buf_set_lines(buf, row, row + 1 + tool.details, false,
      vim.list_extend({ format.tool_line(tool) }, lines))
    tool.details = #lines
    self:_highlight(tool, row)
    self:_highlight_details(row + 1, lines)
  end)
end

--- Adds what a running command wrote (a `toolOutput` event) under its call.
function Transcript:output(id, ev)
  if type(ev.text) ~= 'string' or id == nil or id == '' then
    return
  end
  local tool = self:tool(id, 'Bash')
  if not tool then
    return
  end
  format.add_output(tool, ev.text, ev.elided)
  self:update_tool(id, {})
end

--- Shows all of the output of the tool call at `row` (0-based), or its tail again. Returns
--- false if no call with long output is there.
function Transcript:toggle_output(row)
  for _, tool in pairs(self.tools) do
    local first = self:_tool_row(tool)
    if row >= first and row <= first + tool.details and tool.out
        and #format.output_split(tool) > shown(tool) then
      tool.expanded = not tool.expanded
      self:update_tool(tool.id, {})
      return true
    end
  end
  return false
end

--- Shows that a tool call waits for an answer, with its preview below it.
function Transcript:permission_asked(id, title, preview)
  local tool = self.tools[id]
  local details = nil
  if not (tool and tool.previewed) then
    details = format.preview(preview)
  end
  -- A command's call keeps its title (the model's description of it): the command shows below.
  local keep = tool and type(preview) == 'table' and preview.kind == 'command'
  self:update_tool(id, { title = keep and tool.title or title, status = 'waiting' }, details)
  if self.tools[id] then
    self.tools[id].previewed = self.tools[id].previewed or details ~= nil
  end
end

--- Renders one `turn/event` payload.
function Transcript:event(ev)
  require('heddle.events').render(self, ev)
end

-- Window -------------------------------------------------------------------------------------

--- The window showing the transcript in the current tab page, if any.
function Transcript:window()
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == self.buf then
      return win
    end
  end
  return nil
end

return M
