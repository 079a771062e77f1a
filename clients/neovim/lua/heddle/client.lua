--- The connection to the daemon, on Neovim's built-in LSP client (`vim.lsp`).
---
--- One daemon per editor, started on first use and shared by every session. Work asked for
--- while `initialize` is in flight waits in a queue. Notifications and requests from the daemon
--- go to the functions in `M.handlers` (filled by `heddle.session`), looked up at call time.
local config = require('heddle.config')
local diagnostics = require('heddle.diagnostics')
local documents = require('heddle.documents')
local edits = require('heddle.edits')
local protocol = require('heddle.protocol')

local METHOD_NOT_FOUND = assert(protocol.errors.METHOD_NOT_FOUND)
local M = {}

--- method name -> fun(params): result?  (the result answers a server request)
M.handlers = {}

--- LSP's `window/showMessage`, which the daemon sends (it is not in Heddle's method table).
--- Without a handler in `M.handlers`, Neovim's own shows it.
M.SHOW_MESSAGE = vim.lsp.protocol.Methods.window_showMessage

--- Called with (reason, clean) when the daemon exits; `clean` is false for a crash or a kill.
M.on_exit = nil

local state = {
  id = nil, ---@type integer?
  ready = false,
  waiting = {}, ---@type fun(client: vim.lsp.Client?, err: string?)[]
  server = nil, ---@type table? `capabilities.experimental.heddle` of the initialize result
  server_info = nil, ---@type table? `serverInfo` of the initialize result
  last_error = nil, ---@type string?
}

local has_011 = vim.fn.has('nvim-0.11') == 1

--- Neovim 0.11 made client methods colon calls; 0.10 only has the dot form.
local function invoke(client, name, ...)
  if has_011 then
    return client[name](client, ...)
  end
  return client[name](...)
end

local function dispatch(method, fallback)
  return function(err, params, ctx)
    local handler = M.handlers[method]
    if handler then
      return handler(params)
    elseif fallback then
      return fallback(err, params, ctx)
    end
    return nil, vim.lsp.rpc.rpc_response_error(METHOD_NOT_FOUND)
  end
end

local function flush(client, err)
  local waiting = state.waiting
  state.waiting = {}
  for _, fn in ipairs(waiting) do
    fn(client, err)
  end
end

local function on_init(client, result)
  local caps = result and result.capabilities or {}
  state.server = vim.tbl_get(caps, 'experimental', 'heddle')
  state.server_info = result and result.serverInfo
  state.ready = true
  -- Before the first prompt's requests: the daemon reads the buffers' text from the start.
  documents.start(client.id)
  if not state.server then
    state.last_error = 'the daemon did not announce Heddle capabilities in `initialize`'
  elseif state.server.protocolVersion ~= protocol.version then
    state.last_error = ('the daemon speaks protocol %s, this plugin speaks %s'):format(
      tostring(state.server.protocolVersion),
      protocol.version
    )
    vim.notify('heddle: ' .. state.last_error, vim.log.levels.WARN)
  end
  flush(client, nil)
end

local function on_exit(code, signal, client_id)
  vim.schedule(function()
    if state.id ~= client_id then
      return
    end
    state.id, state.ready, state.server = nil, false, nil
    documents.stop(client_id)
    local reason = ('the daemon exited (code %d%s)'):format(
      code or -1,
      (signal or 0) ~= 0 and (', signal ' .. signal) or ''
    )
    local clean = code == 0 and (signal or 0) == 0
    if not clean then
      state.last_error = reason .. '; see ' .. vim.lsp.log.get_filename()
    end
    -- The session hears first, so a turn that was waiting for the daemon ends saying why.
    if M.on_exit then
      M.on_exit(reason, clean)
    end
    flush(nil, reason)
  end)
end

--- Client capabilities, plus the Heddle ones the daemon reads (`diagnosticRequests`: it may ask
--- for a buffer's diagnostics around an edit, `heddle.diagnostics` answers). `vim.lsp` applies
--- `documentChanges` but does not say so; the daemon sends edits to open buffers only to a
--- client that does (and `heddle.edits` answers them).
local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  -- The daemon shares buffers with real language servers; UTF-16, LSP's default and most
  -- servers' choice, keeps plugins that assume one encoding per buffer from warning.
  caps.general = vim.tbl_extend('force', caps.general or {}, { positionEncodings = { 'utf-16' } })
  caps.workspace = caps.workspace or {}
  caps.workspace.applyEdit = true
  caps.workspace.workspaceEdit = vim.tbl_extend('force', caps.workspace.workspaceEdit or {}, {
    documentChanges = true,
  })
  caps.experimental = vim.tbl_extend('force', caps.experimental or {}, {
    heddle = { permissionRequests = true, reviewHunks = true, diagnosticRequests = true },
  })
  return caps
end

local function apply_edit(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return { applied = false, failureReason = 'the editor lost the connection' }
  end
  return edits.apply(params, client)
end

local function start()
  local opts = config.options
  if vim.fn.executable(opts.cmd[1]) == 0 then
    local hint = 'install Heddle or set `cmd` (:checkhealth heddle)'
    return nil, ('`%s` is not an executable: %s'):format(opts.cmd[1], hint)
  end
  local handlers = {
    [protocol.methods.TURN_EVENT] = dispatch(protocol.methods.TURN_EVENT),
    [protocol.methods.PERMISSION_REQUEST] = dispatch(protocol.methods.PERMISSION_REQUEST),
    [protocol.methods.MCPSERVER_CHANGED] = dispatch(protocol.methods.MCPSERVER_CHANGED),
    [M.SHOW_MESSAGE] = dispatch(M.SHOW_MESSAGE, vim.lsp.handlers[M.SHOW_MESSAGE]),
    [vim.lsp.protocol.Methods.workspace_applyEdit] = apply_edit,
    [protocol.methods.DIAGNOSTICS_LIST] = function(_, params)
      return diagnostics.list(params)
    end,
  }
  local lsp_config = {
    name = 'heddle',
    cmd = opts.cmd,
    cmd_env = opts.cmd_env,
    root_dir = config.workspace(),
    capabilities = capabilities(),
    handlers = handlers,
    on_init = on_init,
    on_exit = on_exit,
  }
  documents.add_root(lsp_config.root_dir)
  local ok, id, err
  if has_011 then
    -- attach=false: `heddle.documents` attaches the buffers under the workspace, once the
    -- daemon is initialized.
    ok, id, err = pcall(vim.lsp.start, lsp_config, {
      attach = false,
      silent = true,
      reuse_client = function()
        return false
      end,
    })
  else
    ok, id, err = pcall(vim.lsp.start_client, lsp_config)
  end
  if not ok or not id then
    local why = not ok and id or err or 'see ' .. vim.lsp.log.get_filename()
    return nil, ('could not start the daemon `%s`: %s'):format(table.concat(opts.cmd, ' '), why)
  end
  state.id, state.ready, state.last_error = id, false, nil
  return id
end

--- The running client, or nil.
--- @return vim.lsp.Client?
function M.get()
  local client = state.id and vim.lsp.get_client_by_id(state.id)
  if client and not invoke(client, 'is_stopped') then
    return client
  end
  return nil
end

--- Calls `fn(client)` once the daemon is initialized (starting it if needed), or
--- `fn(nil, err)` if it cannot start.
--- @param fn fun(client: vim.lsp.Client?, err: string?)
function M.with_client(fn)
  local client = M.get()
  if client and state.ready then
    return fn(client, nil)
  end
  table.insert(state.waiting, fn)
  if not client then
    local _, err = start()
    if err then
      state.last_error = err
      flush(nil, err)
    end
  end
end

--- Sends a request; `cb(err, result)` gets a string error if the daemon is not running.
--- @return integer? request id
function M.request(method, params, cb)
  local client = M.get()
  if not client then
    cb({ message = 'the daemon is not running' }, nil)
    return nil
  end
  local ok, id = invoke(client, 'request', method, params, function(err, result)
    cb(err, result)
  end)
  if not ok then
    cb({ message = 'the daemon is not running' }, nil)
    return nil
  end
  return id
end

--- Sends a notification; returns false if the daemon is not running.
function M.notify(method, params)
  local client = M.get()
  return client ~= nil and invoke(client, 'notify', method, params) or false
end

--- What `:checkhealth heddle` reports about the connection.
function M.info()
  local client = M.get()
  return {
    running = client ~= nil,
    ready = state.ready,
    server = state.server,
    server_info = state.server_info,
    last_error = state.last_error,
  }
end

return M
