--- How each `turn/event` kind shows in the transcript. Kinds this plugin does not know yet
--- (a newer daemon) are skipped, so the output stays readable. `error` is skipped too: the
--- error ends the turn, and the turn's last line already says what it was.
local format = require('heddle.format')

local M = {}

local render = {}

function render.textDelta(t, ev)
  t:text(ev.text)
end

function render.thinkingDelta(t, ev)
  t:thinking(ev.text)
end

function render.modelCall(t, ev)
  t:begin_call(ev.index)
end

function render.tombstone(t, ev)
  if t:drop_call(ev.index) then
    t:note(format.tombstone(ev))
  end
end

function render.toolCallStarted(t, ev)
  t:flush()
  t:tool(ev.toolCallId, ev.tool)
end

function render.toolCallInput(t, ev)
  t:update_tool(ev.toolCallId, { title = ev.title or ev.tool })
end

function render.permissionAsked(t, ev)
  t:permission_asked(ev.toolCallId, ev.title, ev.preview)
end

function render.permissionAnswered(t, ev)
  local fields = { status = ev.decision == 'reject' and 'rejected' or 'running' }
  if ev.decision == 'allowAlways' and ev.rule then
    fields.rule = ev.rule
  end
  if ev.decision == 'reject' and type(ev.reason) == 'string' then
    fields.reason = ev.reason
  end
  t:update_tool(ev.toolCallId, fields)
end

function render.toolCallFinished(t, ev)
  local details = nil
  if type(ev.diff) == 'string' and ev.diff ~= '' then
    details = format.fenced('diff', ev.diff)
  end
  t:update_tool(ev.toolCallId, {
    status = ev.status,
    summary = ev.summary or '',
    exitCode = type(ev.exitCode) == 'number' and ev.exitCode or nil,
    signal = type(ev.signal) == 'string' and ev.signal or nil,
  }, details)
end

function render.modeChanged(t, ev)
  t:note(format.mode_changed(ev))
end

function render.toolOutput(t, ev)
  t:output(ev.toolCallId, ev)
end

function render.toolSummary(t, ev)
  t:note(format.tool_summary(ev))
end

function render.retry(t, ev)
  t:note(format.retry(ev))
end

function render.modelFallback(t, ev)
  t:note(format.model_fallback(ev))
end

function render.compaction(t, ev)
  t:note(format.compaction(ev))
end

function render.loopDetected(t, ev)
  t:note(format.loop_detected(ev))
end

--- Shows `ev`, the `event` of a `turn/event` notification, in transcript `t`.
--- @param t heddle.Transcript
--- @param ev table
function M.render(t, ev)
  local fn = render[ev.kind]
  if fn then
    fn(t, ev)
  end
end

return M
