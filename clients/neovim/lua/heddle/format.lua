--- The lines of the output buffer, as pure functions of what the daemon sent.
local M = {}

--- Status marks of tool calls, and their highlight groups (see `:help heddle-output`).
M.icons =
  { running = '⋯', waiting = '?', ok = '✓', error = '✗', rejected = '⊘', cancelled = '⊘' }
M.groups = {
  running = 'HeddleToolRunning',
  waiting = 'HeddleToolWaiting',
  ok = 'HeddleToolOk',
  error = 'HeddleToolError',
  rejected = 'HeddleToolRejected',
  cancelled = 'HeddleToolRejected',
}

--- What a tool line says after the dash when the daemon gave no summary.
local words = {
  running = '',
  waiting = 'waiting for permission',
  ok = '',
  error = 'failed',
  rejected = 'rejected',
  cancelled = 'cancelled',
}

local reasons = {
  completed = 'completed',
  cancelled = 'cancelled',
  maxTurns = 'stopped: too many model calls',
  promptTooLong = 'stopped: the conversation is too long for the model',
  modelError = 'stopped: model error',
  blockingLimit = 'stopped: context limit reached',
  stopHookPrevented = 'stopped by a hook',
  hookStopped = 'stopped by a hook',
  tokenBudget = 'stopped: token budget spent',
}

local function display_path(path)
  return vim.fn.fnamemodify(path, ':~:.')
end

--- The heading of a turn: the prompt, then what went with it.
--- @param prompt string
--- @param context table[] context items as sent to the daemon
function M.turn_header(prompt, context)
  local prompt_lines = vim.split(vim.trim(prompt), '\n', { plain = true })
  local lines = { '## ' .. prompt_lines[1] }
  for i = 2, #prompt_lines do
    table.insert(lines, '> ' .. prompt_lines[i])
  end
  for _, item in ipairs(context or {}) do
    if item.range then
      table.insert(lines, ('_selection: %s:%d-%d_'):format(
        display_path(item.path), item.range.startLine, item.range.endLine))
    else
      table.insert(lines, ('_file: %s_'):format(display_path(item.path)))
    end
  end
  return lines
end

--- The last line of a turn: how it ended and what it cost.
--- @param result table? the `turn/start` result
--- @param err table? the error `turn/start` failed with instead
function M.footer(result, err)
  if err then
    return ('_error: %s_'):format(err.message or tostring(err))
  end
  local parts = { reasons[result.reason] or tostring(result.reason) }
  if result.reason == 'cancelled' and result.cancelPhase then
    parts[1] = result.cancelPhase == 'tools' and 'cancelled while tools ran'
      or 'cancelled while the model was answering'
  end
  if type(result.error) == 'table' and result.error.message then
    parts[1] = parts[1] .. ': ' .. result.error.message
  end
  local usage = result.usage
  if type(usage) == 'table' and (usage.modelCalls or 0) > 0 then
    local calls = usage.modelCalls
    table.insert(parts, ('%d model call%s'):format(calls, calls == 1 and '' or 's'))
    local tokens = ('%d tokens in, %d out'):format(usage.inputTokens or 0, usage.outputTokens or 0)
    table.insert(parts, tokens)
  end
  return '_' .. table.concat(parts, ' · ') .. '_'
end

--- The line of a tool call: `- ✓ Edit app.py — 1 replacement`.
--- @param tool { status: string, title: string, summary: string, rule: string? }
function M.tool_line(tool)
  local line = ('- %s %s'):format(M.icons[tool.status], tool.title)
  local suffix = tool.summary ~= '' and tool.summary or words[tool.status]
  if suffix ~= '' then
    line = line .. ' — ' .. suffix
  end
  if tool.rule then
    line = line .. (' (always allowed: %s)'):format(tool.rule)
  end
  return line
end

--- `text` in a fenced code block, indented to sit under a tool line.
function M.fenced(lang, text)
  local lines = { '  ```' .. lang }
  for _, line in ipairs(vim.split(text:gsub('\n$', ''), '\n', { plain = true })) do
    table.insert(lines, line == '' and '' or '  ' .. line)
  end
  table.insert(lines, '  ```')
  return lines
end

--- The lines that preview a permission request: the diff of an edit, or the command to run.
function M.preview(preview)
  if type(preview) ~= 'table' then
    return nil
  end
  if preview.kind == 'diff' and type(preview.diff) == 'string' then
    return M.fenced('diff', preview.diff)
  elseif preview.kind == 'command' and type(preview.command) == 'string' then
    return M.fenced('sh', preview.command)
  end
  return nil
end

--- A `retry` event: the model request failed and is tried again.
function M.retry(ev)
  local err = type(ev.error) == 'table' and ev.error.message or ''
  return ('↻ retrying in %.1f s (attempt %d of %d): %s'):format(
    (ev.delayMs or 0) / 1000, ev.attempt or 0, ev.maxAttempts or 0, err)
end

--- A `tombstone` event: what a model call showed was removed, because it is being redone.
function M.tombstone(ev)
  return ('↺ answering again (%s)'):format(ev.reason or 'retry')
end

--- A `modelFallback` event.
function M.model_fallback(ev)
  local err = type(ev.error) == 'table' and ev.error.message
  return ('↻ switched from %s to %s%s'):format(
    ev.fromModel or '?', ev.toModel or '?', err and (': ' .. err) or '')
end

--- A `compaction` event: older messages were summarised to make room.
function M.compaction(ev)
  return ('⇣ compacted the conversation: %d → %d tokens'):format(
    ev.tokensBefore or 0, ev.tokensAfter or 0)
end

--- A `toolSummary` event: one line about a batch of tool calls.
function M.tool_summary(ev)
  return ('_%s_'):format(ev.summary or '')
end

return M
