--- A buffer's diagnostics for the daemon (`diagnostics/list`): around an edit of an open
--- buffer, the daemon asks for them to tell the agent of the errors and warnings it caused.
---
--- The answer is what `vim.diagnostic.get` holds for the buffer, from every namespace (each
--- language server, linters), with `generation`: how many times `DiagnosticChanged` has fired
--- for the buffer, so the daemon can tell that a server has checked the edited text even when
--- it found the same problems.
local M = {}

local api = vim.api

local generations = {} ---@type table<integer, integer>

local group = api.nvim_create_augroup('heddle.diagnostics', { clear = true })
api.nvim_create_autocmd('DiagnosticChanged', {
  group = group,
  callback = function(args)
    generations[args.buf] = (generations[args.buf] or 0) + 1
  end,
})
api.nvim_create_autocmd('BufWipeout', {
  group = group,
  callback = function(args)
    generations[args.buf] = nil
  end,
})

--- The loaded buffer of `uri`, or nil.
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

local function position(line, col)
  return { line = line, character = col or 0 }
end

--- One `vim.diagnostic` item as the protocol's `Diagnostic` (LSP's shape; columns are bytes).
local function wire(d)
  local code = d.code
  if type(code) ~= 'string' and type(code) ~= 'number' then
    code = nil
  end
  return {
    range = {
      start = position(d.lnum, d.col),
      ['end'] = position(d.end_lnum or d.lnum, d.end_col or d.col),
    },
    -- vim.diagnostic numbers severities as LSP does (1 error … 4 hint)
    severity = d.severity or vim.diagnostic.severity.ERROR,
    message = tostring(d.message or ''),
    source = type(d.source) == 'string' and d.source or nil,
    code = code,
  }
end

--- Answers `diagnostics/list`: `{ diagnostics, generation }` of the buffer of `params.uri`;
--- a document that is not loaded has none.
function M.list(params)
  local buf = buffer_of(params and params.uri or '')
  if not buf then
    return { diagnostics = {} }
  end
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    out[#out + 1] = wire(d)
  end
  return { diagnostics = out, generation = generations[buf] or 0 }
end

return M
