--- Review of a proposed edit before it lands: a tab page with the current text (left, read-only)
--- and the proposal (right, editable) in diff mode, a sign and a note on each hunk saying what
--- will happen to it, and keymaps to accept or reject the hunk under the cursor or all of them.
---
--- The answer is built from what the user left on screen: if the proposal buffer no longer
--- holds the proposed text, the daemon gets it as `finalText` (and writes exactly that); else
--- the hunks the user rejected, with their messages, go as `hunks`.
local config = require('heddle.config')
local hunks_of = require('heddle.hunks')

local M = {}

local api = vim.api
local count = 0
local active = nil ---@type heddle.Review?
local closed_waiters = {} ---@type fun()[]

---@class heddle.Review
---@field params table
---@field after string
---@field hunks heddle.Hunk[]
local Review = {}
Review.__index = Review

local function is_hunk(h)
  if type(h) ~= 'table' or type(h.diff) ~= 'string' then
    return false
  end
  for _, key in ipairs({ 'index', 'oldStart', 'oldLines', 'newStart', 'newLines' }) do
    if type(h[key]) ~= 'number' or h[key] < 0 then
      return false
    end
  end
  return true
end

--- Whether a `permission/request` preview can be reviewed hunk by hunk (else the picker asks
--- about the edit as a whole, as for a daemon that sends no texts).
function M.supported(preview)
  if type(preview) ~= 'table' or type(preview.before) ~= 'string'
      or type(preview.after) ~= 'string' or type(preview.hunks) ~= 'table'
      or #preview.hunks == 0 then
    return false
  end
  for i, h in ipairs(preview.hunks) do
    -- Hunks come in order, numbered from 0: the review finds them by position.
    if not is_hunk(h) or h.index ~= i - 1 then
      return false
    end
  end
  return true
end

--- The review on screen, if any.
function M.active()
  return active
end

--- Calls `fn` once no review is on screen.
function M.when_closed(fn)
  if not active then
    return fn()
  end
  table.insert(closed_waiters, fn)
end

local function lines_of(text)
  local lines = vim.split(text, '\n', { plain = true })
  if text:sub(-1) == '\n' then
    table.remove(lines)
  end
  return lines
end

local function scratch(name, lines, modifiable)
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  pcall(api.nvim_buf_set_name, buf, name)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modified = false
  vim.bo[buf].modifiable = modifiable
  return buf
end

--- Syntax colours of the file's type, without setting 'filetype' (which would start language
--- servers and ftplugins on a scratch buffer).
local function colour(buf, path)
  local ft = vim.filetype.match({ filename = path, buf = buf })
  if not ft then
    return
  end
  local lang = vim.treesitter.language.get_lang(ft) or ft
  if not pcall(vim.treesitter.start, buf, lang) then
    vim.bo[buf].syntax = ft
  end
end

--- The hunk on the cursor line of `win`, if the window shows one of the review's buffers.
function Review:hunk_at(win)
  local buf = api.nvim_win_get_buf(win)
  local row = api.nvim_win_get_cursor(win)[1] - 1
  for _, hunk in ipairs(self.hunks) do
    if hunk:contains(buf, row) then
      return hunk
    end
  end
  return nil
end

function Review:set(hunk, decision, message)
  hunk.decision, hunk.message = decision, message
  hunk:draw(self.total)
end

--- Moves the cursor of `win` to the next undecided hunk after `from` (wrapping around), or
--- says none is left.
function Review:next(win, from)
  local n = #self.hunks
  local start = from and from.index + 1 or 0
  for i = 0, n - 1 do
    local hunk = self.hunks[(start + i) % n + 1]
    if not hunk.decision then
      local row = hunk:first_row(api.nvim_win_get_buf(win))
      if row then
        api.nvim_win_set_cursor(win, { row + 1, 0 })
      end
      return
    end
  end
  vim.notify('heddle: every hunk is decided: :AgentAccept applies them', vim.log.levels.INFO)
end

--- The proposal buffer's text, as a file's text.
function Review:text()
  local lines = api.nvim_buf_get_lines(self.proposal, 0, -1, false)
  local text = table.concat(lines, '\n')
  if self.eol and (#lines > 1 or lines[1] ~= '') then
    text = text .. '\n'
  end
  return text
end

--- Whether the user changed the proposal buffer.
function Review:edited()
  return api.nvim_buf_is_valid(self.proposal) and self:text() ~= self.after
end

--- The `permission/request` result for an allowing `decision`, from what is on screen.
function Review:allow(decision, rule)
  local result = { decision = decision, rule = rule }
  if self:edited() then
    result.finalText = self:text()
    return result
  end
  local hunks, rejected = {}, false
  for _, hunk in ipairs(self.hunks) do
    if hunk.decision then
      table.insert(hunks, { index = hunk.index, decision = hunk.decision, message = hunk.message })
      rejected = rejected or hunk.decision == 'reject'
    end
  end
  if rejected then
    result.hunks = hunks
  end
  return result
end

--- Answers the request with `result` (once; later answers are ignored) and closes the review.
function Review:answer(result)
  if self.answered then
    return
  end
  self.answered = true
  self:close()
  self.on_answer(result)
end

--- Takes the review off the screen, back to where the user was.
function Review:close()
  if self.closed then
    return
  end
  self.closed = true
  if api.nvim_tabpage_is_valid(self.tab) and #api.nvim_list_tabpages() > 1 then
    pcall(vim.cmd.tabclose, api.nvim_tabpage_get_number(self.tab))
  end
  for _, buf in ipairs({ self.before, self.proposal }) do
    if api.nvim_buf_is_valid(buf) then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end
  if self.origin and api.nvim_win_is_valid(self.origin) then
    pcall(api.nvim_set_current_win, self.origin)
  end
  if active == self then
    active = nil
    local waiters = closed_waiters
    closed_waiters = {}
    for _, fn in ipairs(waiters) do
      fn()
    end
  end
end

-- Keymaps ------------------------------------------------------------------------------------

local function ask_message(prompt, fn)
  vim.ui.input({ prompt = prompt }, function(input)
    local message = type(input) == 'string' and vim.trim(input) or ''
    fn(message ~= '' and message or nil)
  end)
end

local actions = {}

function actions.accept_hunk(self, win)
  local hunk = self:hunk_at(win)
  if not hunk then
    return vim.notify('heddle: no hunk under the cursor', vim.log.levels.WARN)
  end
  self:set(hunk, 'accept')
  self:next(win, hunk)
end

function actions.reject_hunk(self, win)
  local hunk = self:hunk_at(win)
  if not hunk then
    return vim.notify('heddle: no hunk under the cursor', vim.log.levels.WARN)
  end
  ask_message(('Why reject hunk %d? (optional): '):format(hunk.index + 1), function(message)
    if not self.closed then
      self:set(hunk, 'reject', message)
      self:next(win, hunk)
    end
  end)
end

function actions.accept_all(self)
  for _, hunk in ipairs(self.hunks) do
    self:set(hunk, 'accept')
  end
end

function actions.reject_all(self)
  for _, hunk in ipairs(self.hunks) do
    self:set(hunk, 'reject')
  end
end

local descriptions = {
  accept_hunk = 'Heddle: accept the hunk under the cursor',
  reject_hunk = 'Heddle: reject the hunk under the cursor',
  accept_all = 'Heddle: accept every hunk',
  reject_all = 'Heddle: reject every hunk',
}

function Review:_keymaps()
  local keys = config.options.review.keys
  for _, buf in ipairs({ self.before, self.proposal }) do
    for name, fn in pairs(actions) do
      if keys[name] then
        vim.keymap.set('n', keys[name], function()
          fn(self, api.nvim_get_current_win())
        end, { buffer = buf, nowait = true, desc = descriptions[name] })
      end
    end
  end
end

local function winbar(text)
  return text:gsub('%%', '%%%%')
end

--- The proposal window's bar: what it is and the keys, short enough for half a screen.
local function help_line()
  local keys = config.options.review.keys
  local parts = { 'Proposal' }
  for _, pair in ipairs({
    { 'accept_hunk', 'reject_hunk', 'hunk' },
    { 'accept_all', 'reject_all', 'all' },
  }) do
    local accept, reject = keys[pair[1]], keys[pair[2]]
    if accept and reject then
      table.insert(parts, ('%s/%s accept/reject %s'):format(accept, reject, pair[3]))
    elseif accept or reject then
      table.insert(parts, ('%s %s %s'):format(accept or reject, accept and 'accept' or 'reject', pair[3]))
    end
  end
  table.insert(parts, ':AgentAccept/:AgentReject')
  return table.concat(parts, ' · ')
end

--- Opens the review of `params` (a `permission/request` whose preview is `supported`); calls
--- `on_answer(result)` once the user answers through it (or closes it).
--- @param params table
--- @param on_answer fun(result: table)
--- @return heddle.Review
function M.open(params, on_answer)
  count = count + 1
  local preview = params.preview
  local path = vim.fn.fnamemodify(preview.path or 'file', ':~:.')
  local self = setmetatable({
    params = params,
    after = preview.after,
    -- A proposal without a final newline is compared, and sent back, without one.
    eol = preview.after:sub(-1) == '\n',
    hunks = {},
    total = #preview.hunks,
    on_answer = on_answer,
    origin = api.nvim_get_current_win(),
  }, Review)
  self.before =
    scratch(('heddle://review/%d/%s (now)'):format(count, path), lines_of(preview.before), false)
  self.proposal =
    scratch(('heddle://review/%d/%s'):format(count, path), lines_of(preview.after), true)

  vim.cmd.sbuffer({ args = { self.before }, mods = { tab = vim.fn.tabpagenr('$') } })
  self.tab = api.nvim_get_current_tabpage()
  local left = api.nvim_get_current_win()
  vim.cmd('rightbelow vsplit')
  local right = api.nvim_get_current_win()
  api.nvim_win_set_buf(right, self.proposal)
  for _, win in ipairs({ left, right }) do
    api.nvim_win_call(win, function()
      vim.cmd('diffthis')
    end)
    vim.wo[win].signcolumn = 'yes'
    vim.wo[win].wrap = false
  end
  vim.wo[left].winbar = winbar(('%s — the file now (read-only)'):format(params.title or path))
  vim.wo[right].winbar = winbar(help_line())
  colour(self.before, path)
  colour(self.proposal, path)

  for _, h in ipairs(preview.hunks) do
    local hunk = hunks_of.new(h, self.before, self.proposal)
    table.insert(self.hunks, hunk)
    hunk:draw(self.total)
  end
  self:_keymaps()
  api.nvim_create_autocmd('BufWipeout', {
    buffer = self.proposal,
    once = true,
    callback = function()
      vim.schedule(function()
        self:answer({
          decision = 'reject',
          message = 'The user closed the review without answering.',
        })
      end)
    end,
  })
  active = self
  api.nvim_set_current_win(right)
  self:next(right)
  return self
end

--- `:AgentAccept`: answers the open review with what is on screen. Returns false if none.
function M.accept()
  if not active then
    return false
  end
  active:answer(active:allow('allowOnce'))
  return true
end

--- `:AgentReject`: rejects the whole change, with `message` (asked for if nil). Returns false
--- if no review is open.
function M.reject(message)
  local review = active
  if not review then
    return false
  end
  local function send(text)
    review:answer({ decision = 'reject', message = text })
  end
  if message and vim.trim(message) ~= '' then
    send(vim.trim(message))
  else
    ask_message('Tell Heddle why (optional): ', send)
  end
  return true
end

--- The daemon decided about tool call `id` without this client's answer (it stopped waiting):
--- its review, if open, closes, so that the next edit can be reviewed.
function M.decided(id)
  if active and active.params.toolCallId == id and not active.answered then
    active:answer({ decision = 'reject', message = 'The daemon stopped waiting for the answer.' })
  end
end

--- Closes the open review (the turn ended), answering it with a rejection.
function M.cancel(reason)
  if active then
    active:answer({ decision = 'reject', message = reason })
  end
end

return M
