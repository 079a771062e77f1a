"""Every model-client test runs with both of the SDK's HTTP clients (`HEDDLE_HTTP_CLIENT`)."""

import pytest

from tests.model import clients


@pytest.fixture(autouse=True, params=["aiohttp", "httpx"])
async def http_client(request):
    clients.current = request.param
    yield request.param
    for m in clients.built:
        await m.aclose()
    clients.built.clear()
    clients.current = "aiohttp"
