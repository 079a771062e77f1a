import pytest

from e2e import lsp
from e2e.crashable import Daemon


@pytest.fixture
async def client(daemon_env, daemon_command):
    c = await lsp.start(daemon_env, daemon_command)
    yield c
    await lsp.stop(c)


@pytest.fixture
async def daemons(daemon_env):
    """Start daemons over raw stdio (`await daemons()`); each is stopped, or reaped, at the end."""
    started: list[Daemon] = []

    async def start() -> Daemon:
        d = await Daemon(daemon_env).start()
        started.append(d)
        return d
    yield start
    for d in started:
        await d.stop()
