--- Document sync: the daemon is attached to the `file:` buffers under a session's workspace, so
--- `vim.lsp` sends it didOpen, incremental didChange and didClose, and the agent reads and edits
--- what the user sees rather than what was last saved.
---
--- The daemon is not a language server for features: it advertises no hover, completion or
--- other provider, so `vim.lsp` sets no keymaps or options for it on attach.
local M = {}

local api = vim.api
local group = api.nvim_create_augroup('heddle.documents', { clear = true })

local roots = {} ---@type table<string, true> workspace folders, normalized, without a final '/'
local client_id = nil ---@type integer?

local function normalize(path)
  local real = vim.uv.fs_realpath(path)
  return (vim.fs.normalize(real or path):gsub('(.)/$', '%1'))
end

--- The buffer's file, resolved, if it is a normal buffer on a path (not a scratch buffer, a
--- terminal, `heddle://...` or another URI scheme).
local function file_of(buf)
  if not api.nvim_buf_is_loaded(buf) or vim.bo[buf].buftype ~= '' then
    return nil
  end
  local name = api.nvim_buf_get_name(buf)
  if name == '' or name:match('^%a[%w+.-]*://') then
    return nil
  end
  -- A new file's own path cannot be resolved; its folder can.
  local real = vim.uv.fs_realpath(name)
  if real then
    return vim.fs.normalize(real)
  end
  return vim.fs.joinpath(normalize(vim.fs.dirname(name)), vim.fs.basename(name))
end

--- Whether the buffer shows a file under one of the workspace folders.
function M.tracked(buf)
  local file = file_of(buf)
  if not file then
    return false
  end
  for root in pairs(roots) do
    if file == root or vim.startswith(file, root == '/' and '/' or root .. '/') then
      return true
    end
  end
  return false
end

local function attach(buf)
  if client_id and M.tracked(buf) and not vim.lsp.buf_is_attached(buf, client_id) then
    vim.lsp.buf_attach_client(buf, client_id)
  end
end

local function attach_all()
  for _, buf in ipairs(api.nvim_list_bufs()) do
    attach(buf)
  end
end

--- Adds a workspace folder; its buffers already open are attached now, later ones when read.
--- @param path string
function M.add_root(path)
  roots[normalize(path)] = true
  attach_all()
end

--- The daemon `id` is initialized: attach every buffer under the workspace folders, including
--- those opened before it started, and every one read from now on.
--- @param id integer
function M.start(id)
  client_id = id
  attach_all()
  api.nvim_clear_autocmds({ group = group })
  api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'BufFilePost' }, {
    group = group,
    desc = 'Heddle: send the buffer to the daemon',
    callback = function(args)
      attach(args.buf)
    end,
  })
end

--- The daemon exited: `vim.lsp` detached its buffers.
function M.stop(id)
  if client_id == id then
    client_id = nil
    api.nvim_clear_autocmds({ group = group })
  end
end

return M
