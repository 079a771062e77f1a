--- `:checkhealth heddle`: the Neovim version, the options, a handshake with the daemon, and
--- whether the latest session found the workspace's settings untrusted.
local M = {}

local health = vim.health

local function check_neovim()
  health.start('Neovim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. version)
  else
    health.error('Neovim ' .. version .. ' is too old', { 'Heddle needs Neovim 0.10 or newer' })
  end
end

local function check_config(config)
  health.start('Configuration')
  if #config.problems == 0 then
    health.ok('options are valid')
  end
  for _, problem in ipairs(config.problems) do
    health.error(problem, { 'see :help heddle-config' })
  end
  local opts = config.options
  health.info('daemon command: ' .. table.concat(opts.cmd, ' '))
  health.info('model: ' .. (opts.model or "not set: the settings files' model, else HEDDLE_MODEL"))
  health.info('permission mode: ' .. (opts.permission_mode
    or "not set: the settings files' permissions.mode, else default"))
  health.info('workspace of new sessions: ' .. config.workspace())
end

local function check_daemon(config)
  local client = require('heddle.client')
  local protocol = require('heddle.protocol')
  health.start('Daemon')
  local cmd = config.options.cmd
  local exe = vim.fn.exepath(cmd[1])
  if exe == '' then
    health.error(('`%s` is not an executable'):format(cmd[1]), {
      'install Heddle from its repository (pip install /path/to/heddle) so that `heddle` is on $PATH',
      "or set `cmd`, e.g. { '/path/to/venv/bin/heddle', 'serve' }",
    })
    return
  end
  health.ok(('`%s` is %s'):format(cmd[1], exe))

  local done, failure = false, nil
  client.with_client(function(_, err)
    done, failure = true, err
  end)
  vim.wait(15000, function()
    return done
  end, 20)
  local info = client.info()
  if not done then
    health.error('the daemon did not answer `initialize` within 15 s', {
      'run `' .. table.concat(cmd, ' ') .. '` in a terminal to see what it prints',
    })
    return
  elseif failure then
    health.error('the daemon did not start: ' .. failure, { ':AgentLog! shows its messages' })
    return
  elseif not info.server then
    health.error('the daemon answered `initialize` without Heddle capabilities', {
      '`cmd` must start a Heddle daemon',
    })
    return
  end
  local server = info.server
  health.ok(('daemon %s answered, protocol %s'):format(
    tostring(server.serverVersion or (info.server_info or {}).version or '?'),
    tostring(server.protocolVersion)
  ))
  if server.protocolVersion ~= protocol.version then
    health.error(
      ('this plugin speaks protocol %d, the daemon %s'):format(
        protocol.version,
        tostring(server.protocolVersion)
      ),
      { 'update the plugin and the daemon to the same release' }
    )
  end
  local missing = {}
  for _, method in pairs(protocol.methods) do
    if not vim.tbl_contains(server.methods or {}, method) then
      table.insert(missing, method)
    end
  end
  table.sort(missing)
  if #missing > 0 then
    health.error('the daemon lacks methods: ' .. table.concat(missing, ', '))
  end
  if type(server.tools) == 'table' and #server.tools > 0 then
    health.info('tools: ' .. table.concat(server.tools, ', '))
  end

  local untrusted = require('heddle.trust').untrusted(config.workspace())
  if untrusted then
    health.warn(('%s is not trusted: Heddle ignores %s'):format(
      untrusted.settingsFile,
      table.concat(untrusted.ignored, '; ')
    ), { 'review the file, then run :AgentTrust' })
  end

  local env = config.options.cmd_env or {}
  if not (env.ANTHROPIC_API_KEY or vim.env.ANTHROPIC_API_KEY or env.ANTHROPIC_AUTH_TOKEN
        or vim.env.ANTHROPIC_AUTH_TOKEN) then
    health.warn('ANTHROPIC_API_KEY is not set', {
      'set it in the environment, or pass it in `cmd_env`; the model refuses requests without it',
    })
  end
end

function M.check()
  local config = require('heddle.config')
  check_neovim()
  check_config(config)
  check_daemon(config)
end

return M
