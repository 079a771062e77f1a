-- Heddle's commands. Everything else loads on first use.
if vim.g.loaded_heddle then
  return
end
vim.g.loaded_heddle = 1

local command = vim.api.nvim_create_user_command

command('AgentRun', function(cmd)
  require('heddle').run(cmd.args, { range = cmd.range > 0 and { cmd.line1, cmd.line2 } or nil })
end, { nargs = '*', range = true, desc = 'Heddle: run a prompt (with a range, send those lines)' })

command('AgentCancel', function()
  require('heddle').cancel()
end, { nargs = 0, desc = 'Heddle: cancel the running turn' })

command('AgentNew', function(cmd)
  require('heddle').new(cmd.args, { range = cmd.range > 0 and { cmd.line1, cmd.line2 } or nil })
end, { nargs = '*', range = true, desc = 'Heddle: start a new session, optionally with a prompt' })

command('AgentLog', function(cmd)
  require('heddle').log({ daemon = cmd.bang })
end, { nargs = 0, bang = true, desc = "Heddle: show the transcript (with !, the daemon's log)" })

command('AgentTrust', function()
  require('heddle').trust()
end, { nargs = 0, desc = "Heddle: review the workspace's .heddle/settings.toml and trust it" })

command('AgentAccept', function()
  require('heddle').accept()
end, { nargs = 0, desc = 'Heddle: apply the reviewed edit (the hunks not rejected, or your text)' })

command('AgentReject', function(cmd)
  require('heddle').reject(cmd.args ~= '' and cmd.args or nil)
end, { nargs = '*', desc = 'Heddle: reject the reviewed edit, with an optional message' })
