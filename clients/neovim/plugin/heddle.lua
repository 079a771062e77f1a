-- Heddle's commands. Everything else loads on first use.
if vim.g.loaded_heddle then
  return
end
vim.g.loaded_heddle = 1

local command = vim.api.nvim_create_user_command

command('AgentRun', function(cmd)
  require('heddle').run(cmd.args, {
    range = cmd.range > 0 and { cmd.line1, cmd.line2 } or nil,
    steer = cmd.bang,
  })
end, {
  nargs = '*',
  range = true,
  bang = true,
  desc = 'Heddle: run a prompt (queued while a turn runs; with !, steer the turn)',
})

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

command('AgentToggle', function()
  require('heddle').toggle()
end, { nargs = 0, desc = 'Heddle: show or hide the chat' })

command('AgentSessions', function()
  require('heddle').sessions()
end, { nargs = 0, desc = "Heddle: list the workspace's sessions and resume one" })

command('AgentResume', function(cmd)
  require('heddle').resume(cmd.args)
end, { nargs = '?', desc = 'Heddle: resume a session (default: the latest other one)' })

command('AgentRules', function()
  require('heddle').rules()
end, { nargs = 0, desc = "Heddle: list the session's permission rules and revoke one" })

command('AgentMode', function(cmd)
  require('heddle').mode(cmd.args)
end, {
  nargs = '?',
  complete = function()
    return { 'default', 'acceptEdits', 'plan', 'bypassPermissions' }
  end,
  desc = "Heddle: set the session's permission mode for its next turn",
})

command('AgentModel', function(cmd)
  require('heddle').model(cmd.args)
end, { nargs = '?', desc = "Heddle: set the session's model for its next turn" })

-- <Plug> mappings; the chat's buffers map the `keys` option to them (:help heddle-mappings).
local function plug(name, modes, fn, desc)
  vim.keymap.set(modes, ('<Plug>(heddle-%s)'):format(name), fn, { desc = 'Heddle: ' .. desc })
end
plug('send', 'n', function()
  require('heddle.chat').send(false)
end, 'send the prompt (queued while a turn runs)')
plug('steer', 'n', function()
  require('heddle.chat').send(true)
end, 'send the prompt, interrupting the running turn')
plug('close', 'n', function()
  require('heddle.chat').hide()
end, 'close the chat')
plug('cancel', { 'n', 'i' }, function()
  require('heddle').cancel()
end, 'cancel the running turn')
plug('toggle', 'n', function()
  require('heddle').toggle()
end, 'show or hide the chat')
plug('toggle-output', 'n', function()
  require('heddle.chat').toggle_output()
end, "show all of a command's output, or its tail")
