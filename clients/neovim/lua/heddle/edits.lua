--- The agent's edits to open buffers (`workspace/applyEdit`), saving them per `save_after_edit`,
--- and reloading buffers of files the agent wrote to disk (`checktime`).
---
--- Stock `vim.lsp` answers `applied = true` while silently skipping an edit whose version is
--- older than the buffer, so the agent would believe a change landed that did not. Here every
--- version is checked first, and one mismatch refuses the whole edit with a reason the daemon
--- passes on to the model.
local config = require('heddle.config')

local M = {}

local api = vim.api

--- The `failureReason` of an edit computed from text the user has changed since.
M.STALE = 'the file changed in the editor since the agent read it'

--- Tools whose `toolCallFinished` may mean files changed on disk.
M.WRITERS = { Edit = true, MultiEdit = true, Write = true, Bash = true }

local function refuse(reason)
  return { applied = false, failureReason = reason }
end

--- The loaded buffer of `uri`, or nil (an edit never opens a file: the daemon only sends edits
--- for documents the editor reported open).
local function buffer_of(uri)
  local ok, fname = pcall(vim.uri_to_fname, uri)
  if not ok then
    return nil
  end
  local buf = vim.fn.bufnr(fname)
  if buf > 0 and api.nvim_buf_is_loaded(buf) then
    return buf
  end
  return nil
end

--- Sends the buffer's pending didChange now rather than after `vim.lsp`'s debounce, so the
--- daemon knows the edited text (and its version) before it hears the edit applied; the
--- agent's next edit of the same file is computed from it. `vim.lsp` has no public call for
--- this (its own requests flush the same way).
local function flush(client, buf)
  local ok, tracking = pcall(require, 'vim.lsp._changetracking')
  if ok and type(tracking.flush) == 'function' then
    pcall(tracking.flush, client, buf)
  end
end

local function save(buf, was_modified)
  local mode = config.options.save_after_edit
  if mode == 'never' or (mode == 'if_clean' and was_modified) then
    return
  end
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    vim.cmd('silent write')
  end)
  if not ok then
    vim.notify(
      ('heddle: the edit is in the buffer but could not be saved: %s'):format(err),
      vim.log.levels.WARN
    )
  end
end

--- Answers `workspace/applyEdit`.
--- @param params table `ApplyWorkspaceEditParams`
--- @param client vim.lsp.Client
--- @return table `ApplyWorkspaceEditResult`
function M.apply(params, client)
  local edit = type(params) == 'table' and params.edit
  if type(edit) ~= 'table' then
    return refuse('the request has no edit')
  end
  local changes = edit.documentChanges
  if type(changes) ~= 'table' then
    return refuse('only versioned `documentChanges` are applied')
  end
  -- Everything is checked before anything changes: an edit lands whole or not at all.
  local plan = {}
  for _, change in ipairs(changes) do
    local doc = type(change) == 'table' and change.textDocument
    if type(doc) ~= 'table' or type(change.edits) ~= 'table' then
      return refuse('only text edits are applied (no file creation, renaming or deletion)')
    end
    local buf = buffer_of(doc.uri)
    if not buf then
      return refuse('the file is not open in the editor')
    end
    local version = doc.version
    if version ~= nil and version ~= vim.NIL and version ~= vim.lsp.util.buf_versions[buf] then
      return refuse(M.STALE)
    end
    if not vim.bo[buf].modifiable then
      return refuse('the buffer is not modifiable')
    end
    table.insert(plan, { buf = buf, edits = change.edits, modified = vim.bo[buf].modified })
  end
  for _, step in ipairs(plan) do
    local ok, err = pcall(vim.lsp.util.apply_text_edits, step.edits, step.buf, client.offset_encoding)
    if not ok then
      return refuse(('the editor could not apply the edit: %s'):format(err))
    end
    flush(client, step.buf)
  end
  for _, step in ipairs(plan) do
    save(step.buf, step.modified)
  end
  return { applied = true }
end

--- Reloads the buffers whose files changed on disk. A buffer without unsaved changes is
--- reloaded silently; one with unsaved changes gets Vim's usual question (|W12|), since both
--- sides changed and only the user can tell which to keep.
function M.checktime()
  local group = api.nvim_create_augroup('heddle.checktime', { clear = true })
  api.nvim_create_autocmd('FileChangedShell', {
    group = group,
    callback = function(args)
      local clean = not vim.bo[args.buf].modified
      vim.v.fcs_choice = (clean and vim.v.fcs_reason ~= 'deleted') and 'reload' or 'ask'
    end,
  })
  -- The autocommand exists only during this check, so the user's own `:checktime` and focus
  -- events keep Vim's behaviour.
  pcall(vim.cmd, 'checktime')
  api.nvim_del_augroup_by_id(group)
end

--- A tool call finished (`toolCallFinished`): if it may have written files, reload them.
function M.finished(ev)
  if M.WRITERS[ev.tool] then
    vim.schedule(M.checktime)
  end
end

return M
