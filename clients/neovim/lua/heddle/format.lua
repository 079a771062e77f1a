--- The lines of the output buffer, as pure functions of what the daemon sent.
local M = {}

--- Status marks of tool calls, and their highlight groups (see `:help heddle-output`).
M.icons = {
  running = '⋯',
  waiting = '?',
  ok = '✓',
  error = '✗',
  rejected = '⊘',
  cancelled = '⊘',
  thinking = '✻',
}
M.groups = {
  thinking = 'HeddleThinking',
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
  thinking = '',
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
  loopDetected = 'stopped: repeating itself',
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
    table.insert(parts, M.tokens(usage))
  end
  return '_' .. table.concat(parts, ' · ') .. '_'
end

--- A turn's tokens: all the input the model saw (the share read from the prompt cache) and the
--- output, e.g. `5210 tokens in (82% from cache), 304 out`.
function M.tokens(usage)
  local read = usage.cacheReadInputTokens or 0
  local input = (usage.inputTokens or 0) + read + (usage.cacheCreationInputTokens or 0)
  local cached = input > 0 and read > 0 and (' (%d%% from cache)'):format(math.floor(read * 100 / input))
    or ''
  return ('%d tokens in%s, %d out'):format(input, cached, usage.outputTokens or 0)
end

--- What a failed command's line says: its exit code or the signal that ended it.
local function failure(tool)
  if tool.exitCode then
    return ('failed: exit code %d'):format(tool.exitCode)
  elseif tool.signal then
    return 'failed: killed by ' .. tool.signal
  end
  return nil
end

--- The line of a tool call: `- ✓ Edit app.py — 1 replacement`.
--- @param tool { status: string, title: string, summary: string, rule: string? }
function M.tool_line(tool)
  local line = ('- %s %s'):format(M.icons[tool.status], tool.title)
  local suffix = tool.summary ~= '' and tool.summary or words[tool.status]
  if tool.status == 'error' then
    suffix = failure(tool) or suffix
  elseif tool.status == 'rejected' and tool.reason and tool.reason ~= '' then
    suffix = 'rejected: ' .. tool.reason
  end
  if suffix ~= '' then
    line = line .. ' — ' .. suffix
  end
  if tool.rule then
    line = line .. (' (always allowed: %s)'):format(tool.rule)
  end
  return line
end

-- Command output -----------------------------------------------------------------------------

local OUTPUT = '  │ '
local KEEP = 64 * 1024 -- characters of a call's output kept (its tail)

--- Adds `text` a command wrote to what `tool` keeps of its output.
function M.add_output(tool, text, elided)
  tool.out = (tool.out or '') .. text
  tool.elided = (tool.elided or 0) + (elided or 0)
  if #tool.out > KEEP then
    local cut = tool.out:find('\n', #tool.out - KEEP, true) or (#tool.out - KEEP)
    tool.elided = tool.elided + cut
    tool.out = tool.out:sub(cut + 1)
  end
  tool.split = nil
end

--- The lines of the output `tool` kept, as shown: terminal escapes removed, a line that
--- returned its carriage shown as it ended.
function M.output_split(tool)
  if not tool.split then
    local text = (tool.out or ''):gsub('\27%[[%d;?]*[%a]', ''):gsub('\n$', '')
    local lines = {}
    for _, line in ipairs(vim.split(text, '\n', { plain = true })) do
      line = line:gsub('\r$', '')
      table.insert(lines, (line:match('[^\r]*$')))
    end
    tool.split = (tool.out or '') ~= '' and lines or {}
  end
  return tool.split
end

--- The lines under a tool call that show its output: all of it when `tool.expanded`, else
--- its last `max` lines, after a line that says how many are hidden.
function M.output_lines(tool, max)
  local lines = M.output_split(tool)
  local out = {}
  if (tool.elided or 0) > 0 then
    table.insert(out, ('%s⋯ %d bytes of output left out'):format(OUTPUT, tool.elided))
  end
  local first = 1
  if not tool.expanded and #lines > max then
    first = #lines - max + 1
    table.insert(out, ('%s⋯ %d earlier lines (<Tab> shows them)'):format(OUTPUT, first - 1))
  end
  for i = first, #lines do
    table.insert(out, OUTPUT .. lines[i])
  end
  return out
end

--- Whether a line of the output buffer is command output.
function M.is_output(line)
  return line:sub(1, #OUTPUT) == OUTPUT
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

--- The lines that preview a permission request: the diff of an edit, the command to run, or
--- the plan to approve.
function M.preview(preview)
  if type(preview) ~= 'table' then
    return nil
  end
  if preview.kind == 'diff' and type(preview.diff) == 'string' then
    return M.fenced('diff', preview.diff)
  elseif preview.kind == 'command' and type(preview.command) == 'string' then
    return M.fenced('sh', preview.command)
  elseif preview.kind == 'plan' and type(preview.plan) == 'string' then
    return M.fenced('markdown', preview.plan)
  end
  return nil
end

--- A `modeChanged` event: the user approved a plan and the session goes on in `ev.mode`.
function M.mode_changed(ev)
  return ('▶ plan approved: mode %s from now on'):format(tostring(ev.mode))
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

--- A `loopDetected` event: the repeat guard refused a call that repeated the same ones.
function M.loop_detected(ev)
  return ('⟳ repeating itself: %s'):format(ev.description or ev.tool or '?')
end

--- A `toolSummary` event: one line about a batch of tool calls.
--- The instruction files in force (`instructions` of a `session/new` or `session/load`
--- result) as one line for the transcript; nil when there are none.
function M.instructions(files)
  if not files or #files == 0 then
    return nil
  end
  local names = {}
  for _, f in ipairs(files) do
    table.insert(names, vim.fn.fnamemodify(f.path, ':~:.') .. (f.truncated and ' (cut to fit the cap)' or ''))
  end
  return 'instructions: ' .. table.concat(names, ', ')
end

function M.tool_summary(ev)
  return ('_%s_'):format(ev.summary or '')
end

return M
