"""`[cache]` settings and their environment variables."""

from __future__ import annotations

from pathlib import Path

from heddle.settings import CacheSettings, cache_from_env, merge, parse_settings


def test_defaults_and_context_editing_only_for_anthropics_api():
    assert cache_from_env({}) == (CacheSettings(True, "5m", True), [])
    other, _ = cache_from_env({"ANTHROPIC_BASE_URL": "http://localhost:8080"})
    assert other == CacheSettings(True, "5m", False)
    on, _ = cache_from_env({"ANTHROPIC_BASE_URL": "http://x", "HEDDLE_CONTEXT_EDITING": "1",
                            "HEDDLE_PROMPT_CACHE": "off", "HEDDLE_PROMPT_CACHE_TTL": "1h"})
    assert on == CacheSettings(False, "1h", True)


def test_bad_variables_warn_and_keep_the_default():
    got, warnings = cache_from_env({"HEDDLE_PROMPT_CACHE": "maybe",
                                    "HEDDLE_PROMPT_CACHE_TTL": "10m"})
    assert got == CacheSettings(True, "5m", True)
    assert sorted(warnings) == ["HEDDLE_PROMPT_CACHE=maybe is neither 1 nor 0; using 1",
                                "HEDDLE_PROMPT_CACHE_TTL=10m is not 5m or 1h; using 5m"]


def test_the_settings_file_table_and_merging():
    warnings: list[str] = []
    user = parse_settings(b'[cache]\nttl = "1h"\ncontext_editing = true\n', Path("u"), warnings)
    project = parse_settings(b'[cache]\nprompt_cache = false\nttl = "10m"\n', Path("p"),
                             warnings)
    assert project.cache == CacheSettings(prompt_cache=False)  # the bad ttl alone is dropped
    assert len(warnings) == 1 and "cache.ttl" in warnings[0]
    merged = merge(user, project).cache
    assert merged == CacheSettings(prompt_cache=False, ttl="1h", context_editing=True)
    assert merged.over(CacheSettings(True, "5m", False)) == CacheSettings(False, "1h", True)
