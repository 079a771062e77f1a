--- The hunks of a review: where each one is in the before and proposal buffers, the sign and
--- note that say what will happen to it, and which one is under the cursor. Positions in the
--- proposal buffer are extmarks, so they follow the user's own edits of it.
local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('heddle.review')

for group, link in pairs({
  HeddleHunkPending = 'DiagnosticWarn',
  HeddleHunkAccepted = 'DiagnosticOk',
  HeddleHunkRejected = 'DiagnosticError',
}) do
  api.nvim_set_hl(0, group, { link = link, default = true })
end

local looks = {
  pending = { sign = '?', group = 'HeddleHunkPending', note = 'pending (accepted unless rejected)' },
  accept = { sign = '✓', group = 'HeddleHunkAccepted', note = 'accepted' },
  reject = { sign = '✗', group = 'HeddleHunkRejected', note = 'rejected' },
}

---@class heddle.Hunk
---@field index integer
---@field decision 'accept'|'reject'|nil
---@field message string?
---@field old_rows integer[] rows (0-based) of the removed lines in the before buffer
---@field new_rows integer[] rows (0-based) of the added lines in the proposal buffer
---@field old_range integer[] first and last row of the hunk in the before buffer
---@field range integer extmark spanning the hunk in the proposal buffer
---@field marks table<integer, integer[]> buffer -> sign extmark ids
---@field before integer
---@field proposal integer

local Hunk = {}
Hunk.__index = Hunk

--- Rows (0-based) of the lines a hunk removes and adds, from its `@@` header and body.
local function parse(hunk)
  local old_row, new_row = hunk.oldStart - 1, hunk.newStart - 1
  -- An empty range's start is the line before it (difflib, like diff -u).
  if hunk.oldLines == 0 then
    old_row = hunk.oldStart
  end
  if hunk.newLines == 0 then
    new_row = hunk.newStart
  end
  local old_rows, new_rows = {}, {}
  local body = vim.split(hunk.diff or '', '\n', { plain = true })
  for i = 2, #body do
    local mark = body[i]:sub(1, 1)
    if mark == ' ' then
      old_row, new_row = old_row + 1, new_row + 1
    elseif mark == '-' then
      table.insert(old_rows, old_row)
      old_row = old_row + 1
    elseif mark == '+' then
      table.insert(new_rows, new_row)
      new_row = new_row + 1
    end
  end
  return old_rows, new_rows
end

local function clamp(buf, row)
  return math.max(0, math.min(row, api.nvim_buf_line_count(buf) - 1))
end

--- The hunk `h` of a `permission/request` preview, placed in the two buffers.
--- @return heddle.Hunk
function M.new(h, before, proposal)
  local old_rows, new_rows = parse(h)
  local first = clamp(proposal, h.newStart - 1)
  local last = clamp(proposal, h.newStart - 1 + math.max(h.newLines - 1, 0))
  return setmetatable({
    index = h.index,
    before = before,
    proposal = proposal,
    old_rows = old_rows,
    new_rows = new_rows,
    old_range = { h.oldStart - 1, h.oldStart - 1 + math.max(h.oldLines - 1, 0) },
    range = api.nvim_buf_set_extmark(proposal, ns, first, 0, {
      end_row = last,
      right_gravity = false,
      end_right_gravity = true,
    }),
    marks = {},
  }, Hunk)
end

--- Draws the sign of `hunk` on each of its lines, and its note on its first line.
--- `total`: how many hunks the edit has.
function Hunk:draw(total)
  local hunk = self
  local look = looks[hunk.decision or 'pending']
  for _, side in ipairs({ { self.before, hunk.old_rows }, { self.proposal, hunk.new_rows } }) do
    local buf, rows = side[1], side[2]
    if api.nvim_buf_is_valid(buf) then
      hunk.marks[buf] = hunk.marks[buf] or {}
      for i, row in ipairs(rows) do
        local id = hunk.marks[buf][i]
        if id then
          row = api.nvim_buf_get_extmark_by_id(buf, ns, id, {})[1] or row
        end
        local note = nil
        if i == 1 then
          local text = ('hunk %d/%d: %s'):format(hunk.index + 1, total, look.note)
          if hunk.message then
            text = text .. ' — ' .. hunk.message
          end
          note = { { text, look.group } }
        end
        hunk.marks[buf][i] = api.nvim_buf_set_extmark(buf, ns, clamp(buf, row), 0, {
          id = id,
          sign_text = look.sign,
          sign_hl_group = look.group,
          virt_text = note,
          virt_text_pos = note and 'eol' or nil,
          invalidate = false,
        })
      end
    end
  end
end

--- Whether `row` (0-based) of `buf` is in the hunk.
function Hunk:contains(buf, row)
  local first, last
  if buf == self.before then
    first, last = self.old_range[1], self.old_range[2]
  elseif buf == self.proposal then
    local mark = api.nvim_buf_get_extmark_by_id(buf, ns, self.range, { details = true })
    first, last = mark[1], mark[3] and mark[3].end_row or mark[1]
  end
  return first ~= nil and row >= first and row <= last
end

--- The row (0-based) of the hunk's first changed line in `buf`, if it has one there.
function Hunk:first_row(buf)
  local id = self.marks[buf] and self.marks[buf][1]
  return id and api.nvim_buf_get_extmark_by_id(buf, ns, id, {})[1]
end

return M
