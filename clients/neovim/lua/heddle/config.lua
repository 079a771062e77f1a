--- Heddle's options: the documented defaults, their validation, and the options in effect.
---
--- `set()` always merges over the defaults (never over earlier options), so calling
--- `setup()` twice with the same table gives the same result. An invalid option is reported
--- and replaced by its default rather than breaking the editor.
local M = {}

--- The defaults; `:help heddle-config` documents each one.
M.defaults = {
  -- Command that starts the daemon; it speaks JSON-RPC with LSP framing on stdio.
  cmd = { 'heddle', 'serve' },
  -- Extra environment variables for the daemon, e.g. { ANTHROPIC_API_KEY = '...' }.
  cmd_env = nil,
  -- Model of new sessions (it wins over the settings files and HEDDLE_MODEL). nil: the
  -- settings files' model, else HEDDLE_MODEL, else the built-in default.
  model = nil,
  -- Permission mode of new sessions: 'default', 'acceptEdits', 'plan' or 'bypassPermissions'.
  -- nil: no mode is sent, so the settings files' permissions.mode applies, else 'default'.
  permission_mode = nil,
  -- Workspace folder of new sessions: a path, or a function returning one. nil: the
  -- current directory (|:pwd|) when the session starts.
  workspace = nil,
  -- Send the current file's path along with a prompt given without a range.
  send_current_file = true,
  -- When the daemon starts: 'prompt' (at the first prompt) or 'setup' (when setup() is
  -- called, so the first prompt does not wait for it to load).
  start = 'prompt',
  -- After the agent edits an open buffer: 'if_clean' (save it if it had no unsaved changes
  -- before the edit; a buffer with unsaved changes stays unsaved), 'always' or 'never'.
  save_after_edit = 'if_clean',
  review = {
    -- Keymaps of the review tab page (normal mode, both sides); false disables one.
    keys = {
      accept_hunk = 'ga',
      reject_hunk = 'gr',
      accept_all = 'gA',
      reject_all = 'gR',
    },
  },
  window = {
    -- 'split': the chat is a split beside your code; 'float': a floating window over it.
    layout = 'split',
    -- Where the output split opens: 'right', 'left', 'above' or 'below'.
    position = 'right',
    -- Width (or height for 'above'/'below'): a fraction of the editor, or a number of cells.
    -- For the float: a fraction of the editor (or cells) for both width and height.
    size = 0.4,
    -- Move the cursor into the output window when it opens.
    enter = false,
    -- Height of the prompt window under the chat, in lines; 0: no prompt window.
    input_height = 3,
  },
  -- Keymaps of the chat's buffers (normal mode; `cancel` also in insert mode in the prompt);
  -- false disables one. Each is also a <Plug> mapping (:help heddle-mappings).
  keys = {
    send = '<CR>', -- in the prompt: send it (queued while a turn runs)
    steer = '<M-CR>', -- in the prompt: send it now, interrupting the running turn
    close = 'q', -- close the chat windows
    cancel = '<C-c>', -- cancel the running turn
    toggle_output = '<Tab>', -- in the output: show all / the tail of a command's output
  },
  output = {
    -- Lines of a command's output shown under its call; longer output shows its tail.
    lines = 8,
    -- Lines of the model's thinking shown under its line (its tail); 0: only the line.
    thinking = 2,
  },
}

local permission_modes =
  { default = true, acceptEdits = true, plan = true, bypassPermissions = true }
local save_modes = { if_clean = true, always = true, never = true }
local review_keys = { accept_hunk = true, reject_hunk = true, accept_all = true, reject_all = true }
local positions = { right = true, left = true, above = true, below = true }
local chat_keys = { send = true, steer = true, close = true, cancel = true, toggle_output = true }

local function keys_check(allowed, names)
  return function(v)
    if type(v) ~= 'table' then
      return false, 'a table of keys'
    end
    for name, key in pairs(v) do
      if not allowed[name] or not (key == false or (type(key) == 'string' and key ~= '')) then
        return false, ('a table of %s: a key or false'):format(names)
      end
    end
    return true
  end
end

local function is_cmd(v)
  if type(v) ~= 'table' or #v == 0 then
    return false
  end
  for _, part in ipairs(v) do
    if type(part) ~= 'string' then
      return false
    end
  end
  return true
end

--- One checker per option (nested ones as `window.size`): returns true, or false and what
--- was expected.
M.checks = {
  cmd = function(v)
    return is_cmd(v), 'a non-empty list of strings'
  end,
  cmd_env = function(v)
    return v == nil or type(v) == 'table', 'nil or a table of strings'
  end,
  model = function(v)
    return v == nil or (type(v) == 'string' and v ~= ''), 'nil or a model id'
  end,
  permission_mode = function(v)
    return v == nil or permission_modes[v] == true,
      "nil, 'default', 'acceptEdits', 'plan' or 'bypassPermissions'"
  end,
  workspace = function(v)
    return v == nil or type(v) == 'string' or type(v) == 'function', 'nil, a path or a function'
  end,
  send_current_file = function(v)
    return type(v) == 'boolean', 'a boolean'
  end,
  start = function(v)
    return v == 'prompt' or v == 'setup', "'prompt' or 'setup'"
  end,
  save_after_edit = function(v)
    return save_modes[v] == true, "'if_clean', 'always' or 'never'"
  end,
  ['review.keys'] = keys_check(review_keys, 'accept_hunk, reject_hunk, accept_all, reject_all'),
  keys = keys_check(chat_keys, 'send, steer, close, cancel, toggle_output'),
  ['output.lines'] = function(v)
    return type(v) == 'number' and v >= 1 and v == math.floor(v), 'a whole number of lines'
  end,
  ['output.thinking'] = function(v)
    return type(v) == 'number' and v >= 0 and v == math.floor(v), 'a whole number of lines'
  end,
  ['window.layout'] = function(v)
    return v == 'split' or v == 'float', "'split' or 'float'"
  end,
  ['window.input_height'] = function(v)
    return type(v) == 'number' and v >= 0 and v == math.floor(v), 'a whole number of lines'
  end,
  ['window.position'] = function(v)
    return positions[v] == true, "'right', 'left', 'above' or 'below'"
  end,
  ['window.size'] = function(v)
    return type(v) == 'number' and v > 0, 'a fraction or a number of cells'
  end,
  ['window.enter'] = function(v)
    return type(v) == 'boolean', 'a boolean'
  end,
}

--- The options in effect.
M.options = vim.deepcopy(M.defaults)

--- Problems found by the last `set()`, for `:checkhealth heddle`.
M.problems = {}

local function get(tbl, key)
  local value = tbl
  for part in key:gmatch('[^.]+') do
    if type(value) ~= 'table' then
      return nil
    end
    value = value[part]
  end
  return value
end

local function put(tbl, key, value)
  local parts = vim.split(key, '.', { plain = true })
  for i = 1, #parts - 1 do
    tbl = tbl[parts[i]]
  end
  tbl[parts[#parts]] = value
end

local function unknown_keys(opts, defaults, prefix, out)
  for key, value in pairs(opts) do
    local name = prefix .. key
    if M.checks[name] == nil and type(defaults[key]) ~= 'table' then
      table.insert(out, ('unknown option `%s`'):format(name))
    elseif type(value) == 'table' and type(defaults[key]) == 'table' and not M.checks[name] then
      unknown_keys(value, defaults[key], name .. '.', out)
    end
  end
end

--- Merges `opts` over the defaults; invalid options are reported and keep their default.
--- @param opts table?
--- @return table options in effect
function M.set(opts)
  opts = opts or {}
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  -- tbl_deep_extend merges list-like tables element-wise; the command is replaced as a whole.
  if opts.cmd ~= nil then
    merged.cmd = opts.cmd
  end
  local problems = {}
  unknown_keys(opts, M.defaults, '', problems)
  for key, check in pairs(M.checks) do
    local ok, expected = check(get(merged, key))
    if not ok then
      table.insert(problems, ('option `%s` must be %s; using the default'):format(key, expected))
      put(merged, key, vim.deepcopy(get(M.defaults, key)))
    end
  end
  table.sort(problems)
  M.options = merged
  M.problems = problems
  if #problems > 0 then
    vim.notify('heddle: ' .. table.concat(problems, '\n'), vim.log.levels.WARN)
  end
  return merged
end

--- The workspace folder for a new session, as an absolute path.
--- @return string
function M.workspace()
  local ws = M.options.workspace
  if type(ws) == 'function' then
    ws = ws()
  end
  if type(ws) ~= 'string' or ws == '' then
    ws = vim.fn.getcwd()
  end
  return (vim.fn.fnamemodify(vim.fs.normalize(ws), ':p'):gsub('(.)/$', '%1'))
end

-- Options without a setup() call (a plugin manager spec with no config function): the table
-- `vim.g.heddle`, read when the plugin is first used.
if type(vim.g.heddle) == 'table' then
  M.set(vim.g.heddle)
end

return M
