import pytest

from e2e import lsp


@pytest.fixture
async def client(daemon_env, daemon_command):
    c = await lsp.start(daemon_env, daemon_command)
    yield c
    await lsp.stop(c)
