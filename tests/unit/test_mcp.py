"""MCP pieces: the settings, the rules that name MCP tools, result conversion, tool naming,
secrets kept out of what is shown, and the SDK imported only by a session with servers."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest

from heddle.mcp import client
from heddle.mcp.config import McpServerConfig, from_settings
from heddle.mcp.servers import Server, start_servers
from heddle.mcp.tools import tools_of
from heddle.mcp.values import RemoteTool
from heddle.rules import RuleError, check_rule, covers
from heddle.settings import load_settings

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "config")}


USER = """
[mcp.servers.gh]
command = "gh-mcp"
args = ["--stdio"]
env = { GH_TOKEN = "tok-123" }
trust_read_only = true
timeout = 9

[mcp.servers.web]
url = "https://example.test/mcp"
headers = { Authorization = "Bearer abc" }

[mcp.servers.bad]
command = 3
"""


def test_servers_from_user_settings_one_bad_entry_alone_is_ignored(tmp_path, env):
    write(tmp_path / "config/heddle/settings.toml", USER)
    loaded = load_settings(None, env)
    gh, web, bad = from_settings(loaded)  # "bad" loses its command alone, with a warning
    assert (gh.name, gh.command, gh.args, dict(gh.env), gh.trust_read_only, gh.timeout) == \
        ("gh", "gh-mcp", ("--stdio",), {"GH_TOKEN": "tok-123"}, True, 9)
    assert (web.transport, web.url, gh.transport, gh.source) == \
        ("http", "https://example.test/mcp", "stdio", "user")
    assert any("mcp.servers.bad.command" in w for w in loaded.warnings)
    assert bad.problem() == "MCP server bad: give either `command` (stdio) or `url` (HTTP)"


async def test_a_server_that_cannot_be_started_as_configured_is_listed_as_failed(tmp_path):
    servers = await start_servers([McpServerConfig("bad"), McpServerConfig("bad", url="x")],
                                  tmp_path, startup=0.01)
    (status,) = servers.status()
    assert (status.name, status.state) == ("bad", "failed") and "give either" in status.error
    assert len(servers.problems) == 2  # and the second "bad" is the first's twin
    await servers.close()


def test_project_servers_wait_for_trust_and_cannot_trust_their_own_hints(tmp_path, env):
    ws = tmp_path / "ws"
    write(ws / ".heddle/settings.toml",
          '[mcp.servers.proj]\ncommand = "./serve"\nargs = ["-v"]\ntrust_read_only = true\n'
          'env = { KEY = "s3cret" }\n')
    loaded = load_settings(ws, env)
    assert from_settings(loaded) == []
    assert loaded.untrusted is not None
    assert "MCP server proj `./serve -v`" in loaded.untrusted.ignored
    assert "s3cret" not in loaded.untrusted.message

    from heddle import trust_store
    trust_store.record(tmp_path / "config/heddle" / trust_store.TRUST_FILE, ws,
                       loaded.untrusted.sha256)
    (proj,) = from_settings(load_settings(ws, env))
    assert (proj.source, proj.command, proj.trust_read_only) == ("project", "./serve", False)


def test_rules_name_mcp_tools_whole_by_server_or_all():
    tool = "mcp__github__create_issue"
    for rule in ("mcp__github__create_issue", "mcp__github", "mcp__github__*", "mcp__*"):
        assert covers(check_rule(rule), tool), rule
    for rule in ("mcp__gitlab", "mcp__git", "mcp__github__list", "mcp__gitlab__*", "Bash"):
        assert not covers(check_rule(rule), tool), rule
    assert not covers("mcp__*", "Bash")
    with pytest.raises(RuleError):
        check_rule("Ba*")  # a wildcard names MCP tools only


def test_results_convert_text_images_resources_and_errors():
    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="hello"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        types.ImageContent(type="image", data="not base64!", mime_type="image/png"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri="file:///a.txt", text="inside")),
        types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
            uri="file:///b.bin", blob=PNG, mime_type="application/zip")),
    ], is_error=True)
    out = client.convert(result)
    assert out.is_error
    assert out.images == (("image/png", PNG),)
    assert out.text.split("\n") == [
        "hello", "[an image (image/png) that is not valid base64]",
        "[resource file:///a.txt]", "inside",
        f"[resource file:///b.bin: application/zip, {len(PNG)} base64 characters, not shown]"]


def test_tools_are_sorted_named_to_fit_and_built_once(tmp_path):
    config = McpServerConfig("my.srv", command="x", trust_read_only=False)
    server = Server(config, tmp_path)
    server.listed = (RemoteTool("zeta", "z" * 5000, {"type": "object"}),
                     RemoteTool("a b", "A", {"type": "object"}, read_only_hint=True),
                     RemoteTool("a_b", "dup", {"type": "object"}))
    tools = tools_of([server])
    assert list(tools) == ["mcp__my_srv__a_b", "mcp__my_srv__zeta"]  # "a b" came first
    a, zeta = tools.values()
    assert (a.remote, a.read_only) == ("a b", False)  # the hint alone is not believed
    assert len(zeta.definition["description"]) == 2048
    trusted = Server(McpServerConfig("s", command="x", trust_read_only=True), tmp_path)
    trusted.listed = (RemoteTool("t" * 80, "", {"type": "object"}, read_only_hint=True),)
    (long,) = tools_of([trusted]).values()
    assert long.read_only and len(long.name) == 64


def test_a_config_shows_no_secret_values():
    config = McpServerConfig("gh", command="gh-mcp", env={"GH_TOKEN": "tok-123"},
                             headers={"Authorization": "Bearer abc"})
    assert "tok-123" not in repr(config) and "Bearer abc" not in str(config)
    assert "GH_TOKEN" in repr(config)


def test_a_config_needs_a_command_or_a_url():
    assert McpServerConfig("a").problem()
    assert McpServerConfig("a", command="x", url="http://h").problem()
    assert McpServerConfig("a", url="ftp://h").problem()
    assert McpServerConfig("a", url="http://h").problem() is None


CHECK = """
import sys, anyio
from pathlib import Path
from heddle.rpc import handlers, server  # the daemon, as `heddle serve` has it
from heddle.permissions.policy import PermissionPolicy
from heddle.sessions.session import SessionRegistry
from heddle.settings import load_settings

async def main():
    ws = Path(sys.argv[1])
    loaded = load_settings(ws)
    s = SessionRegistry().new(str(ws), "m", PermissionPolicy.from_settings(loaded))
    await handlers.start_mcp(s, loaded)
    print("mcp" in sys.modules, s.mcp is not None)
    if s.mcp is not None:
        await s.mcp.close()
anyio.run(main)
"""


@pytest.mark.parametrize("servers", [False, True])
def test_the_sdk_is_imported_only_by_a_session_with_servers(tmp_path, servers):
    ws = tmp_path / "ws"
    ws.mkdir()
    if servers:
        write(tmp_path / "config/heddle/settings.toml",
              '[mcp]\nstartup_timeout = 30\n[mcp.servers.none]\ncommand = "/nonexistent"\n')
    out = subprocess.run([sys.executable, "-I", "-c", CHECK, str(ws)], capture_output=True,
                         text=True, timeout=50, env={"XDG_CONFIG_HOME": str(tmp_path / "config"),
                                                     "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ([str(servers)] * 2)
