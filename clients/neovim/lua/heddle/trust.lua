--- Trusting the workspace's project settings (`.heddle/settings.toml`): the warning when a
--- session ignores what they would enable, and `:AgentTrust`, which shows the file and what
--- trusting it enables, asks, and sends `workspace/trust`.
---
--- What trusting enables is known from the `untrustedSettings` of the latest session on the
--- workspace. Before any session the file itself is what the user reviews, and its hash makes
--- the daemon trust only that content. Trust applies to sessions opened after it.
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

--- What the user is shown before trusting `workspace`'s settings: `{ settings_file, sha256?,
--- enables? }`, `enables` from the latest session, else nil (the file is what to review);
--- `sha256` nil: there is no file.
--- @param workspace string
--- @return table
function M.review(workspace)
  local untrusted = known[key(workspace)]
  if untrusted then
    return {
      settings_file = untrusted.settingsFile,
      sha256 = untrusted.sha256,
      enables = untrusted.ignored,
    }
  end
  local file = vim.fs.joinpath(workspace, '.heddle', 'settings.toml')
  local fd = io.open(file, 'rb')
  if not fd then
    return { settings_file = file }
  end
  local data = fd:read('*a')
  fd:close()
  return { settings_file = file, sha256 = vim.fn.sha256(data) }
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

--- `:AgentTrust`: shows the workspace's settings file and what trusting it enables, asks with
--- `vim.ui.select` (kind `heddle.trust`), and trusts it on "Trust it".
function M.command()
  local workspace = config.workspace()
  local review = M.review(workspace)
  if not review.sha256 then
    return notify(('there is no %s, so there is nothing to trust'):format(review.settings_file))
  end
  local what = review.enables and ('It enables: ' .. table.concat(review.enables, '; '))
    or 'No session has read it as it is now: review the file first'
  vim.ui.select(choices, {
    prompt = ('Heddle: trust %s? %s'):format(review.settings_file, what),
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

--- For `:checkhealth heddle`: what the latest session on `workspace` said (nil: no session
--- on it yet, or its settings needed no trust).
function M.untrusted(workspace)
  return known[key(workspace)]
end

return M
