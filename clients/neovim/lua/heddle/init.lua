--- Heddle for Neovim: a coding agent that works in your editor.
---
--- This module is the public API; `:help heddle` documents it. Nothing starts until the first
--- prompt (or `setup()` with `start = 'setup'`): the daemon is spawned then, through Neovim's
--- built-in LSP client.
local M = {}

--- Sets the options, merged over the defaults (`:help heddle-config`). Calling it again
--- replaces the earlier options; calling it at all is optional.
--- @param opts table?
function M.setup(opts)
  local config = require('heddle.config')
  config.set(opts)
  if config.options.start == 'setup' then
    -- Start the daemon now; a failure is reported by the first prompt, as without this.
    require('heddle.client').with_client(function() end)
  end
  return M
end

--- Runs `prompt` in the current session. Without a prompt, asks for one with `vim.ui.input`.
--- While a turn runs, the prompt is queued for the turn's next step, or with `steer` it
--- interrupts the turn.
--- @param prompt string?
--- @param opts { range: integer[]?, buf: integer?, steer: boolean? }? `range = { line1, line2 }`
--- sends those lines
function M.run(prompt, opts)
  opts = opts or {}
  local buf = opts.buf or vim.api.nvim_get_current_buf()
  local context = require('heddle.context').collect(buf, opts.range)
  local how = { steer = opts.steer }
  if prompt == nil or vim.trim(prompt) == '' then
    vim.ui.input({ prompt = 'Heddle: ' }, function(input)
      if input and vim.trim(input) ~= '' then
        require('heddle.session').run(vim.trim(input), context, how)
      end
    end)
    return
  end
  return require('heddle.session').run(vim.trim(prompt), context, how)
end

--- Shows the chat (output and prompt windows) if it is hidden, else hides it.
function M.toggle()
  if #require('heddle.chat').windows() > 0 then
    return require('heddle.chat').hide()
  end
  require('heddle.session').show(true)
  local prompt = vim.fn.win_findbuf(require('heddle.chat').input_buffer())[1]
  if prompt then
    vim.api.nvim_set_current_win(prompt)
  end
end

--- Lists the workspace's sessions (`vim.ui.select`); the one chosen is resumed.
function M.sessions()
  return require('heddle.pickers').sessions()
end

--- Resumes session `id`, replaying its history; without `id`, the workspace's latest session
--- other than the current one.
--- @param id string?
function M.resume(id)
  return require('heddle.pickers').resume(id)
end

--- Lists the permission rules of the current session; the one chosen is revoked.
function M.rules()
  return require('heddle.pickers').rules()
end

--- Sets the permission mode of the current session from its next turn (asks without one).
--- @param mode string?
function M.mode(mode)
  return require('heddle.pickers').mode(mode)
end

--- Sets the model of the current session from its next turn (asks without one).
--- @param model string?
function M.model(model)
  return require('heddle.pickers').model(model)
end

--- A statusline component: `heddle running · ctx 12%`; `''` until Heddle is used.
function M.statusline()
  if not package.loaded['heddle.session'] then
    return ''
  end
  local s = require('heddle.session').status()
  if not s.buf then
    return ''
  end
  local parts = { 'heddle ' .. s.state }
  local ctx = s.context
  if ctx and ctx.window and ctx.window > 0 then
    table.insert(parts, ('ctx %d%%'):format(math.floor(ctx.tokens * 100 / ctx.window + 0.5)))
  end
  if s.mode and s.mode ~= 'default' then
    table.insert(parts, s.mode)
  end
  return table.concat(parts, ' · ')
end

--- Cancels the running turn. Returns false if no turn runs.
function M.cancel()
  return require('heddle.session').cancel()
end

--- Starts a new session (cancelling a running turn), then runs `prompt` in it if given.
--- @param prompt string?
function M.new(prompt, opts)
  require('heddle.session').new()
  if prompt and vim.trim(prompt) ~= '' then
    return M.run(prompt, opts)
  end
end

--- The daemon's log file: `HEDDLE_LOG_FILE`, else `$XDG_STATE_HOME/heddle/heddle.log`, looked up
--- in `cmd_env` first and then in the editor's environment, as the daemon does.
function M.daemon_log()
  local env = require('heddle.config').options.cmd_env or {}
  local file = env.HEDDLE_LOG_FILE or vim.env.HEDDLE_LOG_FILE
  if file and file ~= '' then
    return file
  end
  local state = env.XDG_STATE_HOME or vim.env.XDG_STATE_HOME
  if not state or state == '' then
    state = vim.fs.normalize('~/.local/state')
  end
  return state .. '/heddle/heddle.log'
end

--- Shows the transcript of the current session and moves the cursor into it.
--- With `daemon = true`, opens the daemon's log file in a new tab page instead.
--- @param opts { daemon: boolean? }?
function M.log(opts)
  if opts and opts.daemon then
    vim.cmd.tabnew(vim.fn.fnameescape(M.daemon_log()))
    return
  end
  require('heddle.session').show(true)
end

--- Reviews the workspace's `.heddle/settings.toml` (what trusting it enables), asks, and
--- trusts it, so that sessions opened from now on apply what it widens.
function M.trust()
  return require('heddle.trust').command()
end

--- Answers the edit under review: the hunks not rejected are applied, or, if you changed the
--- proposal, your text. Returns false if no review is open.
function M.accept()
  local ok = require('heddle.review').accept()
  if not ok then
    vim.notify('heddle: no edit is waiting for review', vim.log.levels.WARN)
  end
  return ok
end

--- Rejects the edit under review, telling the agent `message` (asked for when nil). Returns
--- false if no review is open.
--- @param message string?
function M.reject(message)
  local ok = require('heddle.review').reject(message)
  if not ok then
    vim.notify('heddle: no edit is waiting for review', vim.log.levels.WARN)
  end
  return ok
end

--- Where things stand: `{ state = 'idle'|'starting'|'running'|'waiting', session_id, turn_id,
--- buf, last, context, mode, model }`, `last` being the result of the last turn, `context`
--- `{ tokens, window }` of the conversation.
function M.status()
  return require('heddle.session').status()
end

return M
