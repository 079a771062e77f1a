--- What goes along with a prompt: the selected lines, or else the current file's path.
local config = require('heddle.config')

local M = {}

--- The absolute path the daemon is told for buffer `buf`. Buffers that are not files (scratch,
--- unnamed) are named as if they were in the workspace, so the model sees where text came from.
local function path_of(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  if vim.bo[buf].buftype == '' and name ~= '' then
    return vim.fn.fnamemodify(name, ':p')
  end
  local base = name ~= '' and vim.fs.basename(name) or '[No Name]'
  return config.workspace() .. '/' .. base
end

--- Context items for a prompt typed in buffer `buf`.
--- @param buf integer
--- @param range integer[]? `{ line1, line2 }`, 1-based and inclusive: the selected lines
--- @return table[] context items as `turn/start` takes them
function M.collect(buf, range)
  local language = vim.bo[buf].filetype
  language = language ~= '' and language or nil
  if range then
    local lines = vim.api.nvim_buf_get_lines(buf, range[1] - 1, range[2], false)
    return {
      {
        path = path_of(buf),
        text = table.concat(lines, '\n'),
        range = { startLine = range[1], endLine = range[2] },
        language = language,
      },
    }
  end
  local name = vim.api.nvim_buf_get_name(buf)
  if config.options.send_current_file and vim.bo[buf].buftype == '' and name ~= '' then
    return { { path = vim.fn.fnamemodify(name, ':p'), language = language } }
  end
  return {}
end

return M
