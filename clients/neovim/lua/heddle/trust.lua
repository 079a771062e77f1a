--- Trusting the workspace's project settings (`.heddle/settings.toml`): the warning when a
--- session ignores what they would enable, and `:AgentTrust`, which asks the daemon what
--- trusting the file as it is now would enable (`workspace/trust` with `dryRun`), asks the
--- user, and sends `workspace/trust` with the hash of the content that was reviewed, so that a
--- file changed in between is not trusted. Trust applies to sessions opened after it.
local client = require('heddle.client')
local config = require('heddle.config')
local protocol = require('heddle.protocol')

local M = {}

--- real path of a workspace -> the `untrustedSettings` of its latest session
local known = {}

local choices = {
  { decision = 'trust', label = 'Trust it' },
  { decision = 'review', label = 'Review the file' },
  { decision = 'cancel', label = 'Not now' },
}

local function notify(message, level)
  vim.notify('heddle: ' .. message, level or vim.log.levels.INFO)
end

--- The daemon reports real paths: compare workspaces that way (a symlinked folder).
local function key(folder)
  return vim.uv.fs_realpath(folder) or folder
end

--- Remembers what a `session/new` result says about trust, and warns if settings are ignored.
--- @param result table
function M.remember(result)
  local untrusted = result.untrustedSettings
  known[key(result.workspace)] = untrusted
  if untrusted then
    local text = '%s is not trusted, so Heddle ignores what it would enable: %s.'
      .. ' Review it, then run :AgentTrust to trust it.'
    notify(
      text:format(untrusted.settingsFile, table.concat(untrusted.ignored, '; ')),
      vim.log.levels.WARN
    )
  end
end

--- Asks the daemon what trusting `workspace`'s settings as they are now would enable, then
--- calls `cb(err, review)`: `review` is `{ settings_file, sha256?, enables, trusted }`, with
--- `sha256` nil when there is no file and `enables` empty when nothing in it needs trust.
--- @param workspace string
--- @param cb fun(err: table?, review: table?)
function M.review(workspace, cb)
  client.with_client(function(_, err)
    if err then
      return cb({ message = err })
    end
    local params = { workspace = workspace, dryRun = true }
    client.request(protocol.methods.WORKSPACE_TRUST, params, function(rerr, result)
      if rerr then
        return cb(rerr)
      end
      cb(nil, {
        settings_file = result.settingsFile,
        sha256 = result.sha256 ~= vim.NIL and result.sha256 or nil,
        enables = result.enables or {},
        trusted = result.trusted ~= false,
      })
    end)
  end)
end

local function trusted(workspace, result)
  known[key(workspace)] = nil
  local enables = result.enables or {}
  local what = #enables > 0 and (', which enables ' .. table.concat(enables, '; ')) or ''
  local renewed = require('heddle.session').renew()
  notify(('trusts %s now%s. %s'):format(
    result.settingsFile,
    what,
    renewed and 'The next prompt starts a new session, which applies it.'
      or 'Sessions opened from now on apply it.'
  ))
end

local function send(workspace, review)
  local function failed(why)
    notify(('could not trust %s: %s'):format(review.settings_file, why), vim.log.levels.ERROR)
  end
  client.with_client(function(_, err)
    if err then
      return failed(err)
    end
    local params = { workspace = workspace, sha256 = review.sha256 }
    client.request(protocol.methods.WORKSPACE_TRUST, params, function(rerr, result)
      if not rerr then
        return trusted(workspace, result)
      end
      known[key(workspace)] = nil
      if rerr.code ~= protocol.errors.SETTINGS_CHANGED then
        return failed(rerr.message)
      end
      local text = 'did not trust %s: it changed since it was shown to you.'
        .. ' Run :AgentTrust again to review it as it is now.'
      notify(text:format(review.settings_file), vim.log.levels.WARN)
    end)
  end)
end

--- Asks with `vim.ui.select` (kind `heddle.trust`) whether to trust what `review` enables.
local function ask(workspace, review)
  local prompt = 'Heddle: trust %s? It enables: %s'
  vim.ui.select(choices, {
    prompt = prompt:format(review.settings_file, table.concat(review.enables, '; ')),
    format_item = function(choice)
      return choice.label
    end,
    kind = 'heddle.trust',
  }, function(choice)
    if choice and choice.decision == 'review' then
      vim.cmd.split(vim.fn.fnameescape(review.settings_file))
    elseif choice and choice.decision == 'trust' then
      send(workspace, review)
    end
  end)
end

--- `:AgentTrust`: asks the daemon what trusting the workspace's settings file would enable,
--- and asks the user, unless there is no file, nothing in it needs trust, or it is trusted.
function M.command()
  local workspace = config.workspace()
  M.review(workspace, function(err, review)
    if err then
      return notify('could not review the settings of ' .. workspace .. ': ' .. err.message,
        vim.log.levels.ERROR)
    end
    local file = review.settings_file
    if not review.sha256 then
      notify(('there is no %s, so there is nothing to trust'):format(file))
    elseif #review.enables == 0 then
      notify(('nothing in %s needs trust: all of it applies without trust'):format(file))
    elseif review.trusted then
      notify(('%s is already trusted as it is now; it enables %s'):format(
        file, table.concat(review.enables, '; ')))
    else
      ask(workspace, review)
    end
  end)
end

--- For `:checkhealth heddle`: what the latest session on `workspace` said (nil: no session
--- on it yet, or its settings needed no trust).
function M.untrusted(workspace)
  return known[key(workspace)]
end

return M
