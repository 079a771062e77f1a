"""Model callers for the tests, built with the HTTP client under test (conftest.py sets it and
closes what was built after each test)."""

from heddle.model.anthropic_client import AnthropicModel, ModelSettings

current = "aiohttp"
built: list[AnthropicModel] = []


def model(*args, **settings) -> AnthropicModel:
    """`AnthropicModel(ModelSettings(**settings), *args)` using the current HTTP client."""
    m = AnthropicModel(ModelSettings(http_client=current, **settings), *args)
    built.append(m)
    return m
