"""`query()`: the agent loop as an async generator of core events, ending with a `Terminal`.

The generator is a short driver over named steps (`heddle.loop.steps`, the model call in
`heddle.loop.model_call`): guards → prepare the context → call the model → recover → output
limit → answer → finish or continue → run the tools. Each step yields its events and last an
outcome; every `Again` is a complete new frozen `LoopState` whose `transition` says why, and
the Terminal lists those reasons. Cancellation from the caller's cancel scope is caught by the
step it lands in, which closes the conversation so the next request is valid: every tool_use
gets a tool_result, synthetic if need be.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import AsyncIterator, Callable

from heddle.context.windows import Limits
from heddle.core.events import CoreEvent, ErrorReport, Terminal
from heddle.core.messages import Message
from heddle.loop.deps import LoopDeps
from heddle.loop.model_call import call_model
from heddle.loop.outcomes import OUTCOMES, Onward, Query, Stop
from heddle.loop.params import LoopConfig, LoopRuntime
from heddle.loop.repeats import Repeats
from heddle.loop.state import LoopState
from heddle.loop.steps import (answer, finish, guards, output_limit, prepare_context, recover,
                               run_tools)
from heddle.loop.summaries import Background
from heddle.model.limits import model_limits

STEPS = (guards, prepare_context, call_model, recover, output_limit, answer, finish,
         run_tools)


async def query(messages: tuple[Message, ...], config: LoopConfig, deps: LoopDeps,
                run: LoopRuntime) -> AsyncIterator[CoreEvent]:
    """Run the loop on `messages` until it ends; the last item is the Terminal."""
    background = Background(run.task_group)
    limits_of = config.limits_for or table_limits
    q = Query(config, deps, run, config.limits or limits_of(config.model),
              deps.tools.schemas(), background, limits_of)
    try:
        first = LoopState(messages=messages, model=config.model, repeats=Repeats(config.repeats))
        async with aclosing(_loop(q, first)) as loop:
            async for ev in loop:
                yield ev
    finally:
        background.close()


def table_limits(model: str) -> Limits:
    """The built-in table's limits of `model`."""
    found = model_limits(model)
    return Limits(found.context_window, found.max_output, found.thinking)


async def _loop(q: Query, state: LoopState) -> AsyncIterator[CoreEvent]:
    """Each step gets the previous one's `Onward` and yields events, then its own outcome."""
    transitions: list[str] = []
    while True:
        outcome = Onward(state)
        for step in STEPS:
            async with aclosing(step(q, outcome)) as items:
                async for item in items:
                    if isinstance(item, OUTCOMES):
                        outcome = item
                    else:
                        yield item
            if not isinstance(outcome, Onward):
                break
        if isinstance(outcome, Stop):
            if outcome.error is not None:
                yield ErrorReport(outcome.error)
            yield Terminal(outcome.reason, outcome.messages, outcome.state.usage, outcome.text,
                           outcome.error, tuple(transitions))
            return
        state = outcome.state
        transitions.append(state.transition.reason.value)


async def drive(events: AsyncIterator[CoreEvent], on_event: Callable[[CoreEvent], None]) -> Terminal:
    """Consume a query to its end, passing each event on; returns the Terminal."""
    async with aclosing(events) as gen:
        async for ev in gen:
            if isinstance(ev, Terminal):
                return ev
            on_event(ev)
    raise RuntimeError("query() ended without a Terminal")
