"""A real MCP server for the tests, on the `mcp` SDK (MCPServer, formerly FastMCP), over stdio
(`python -I mcp_server.py`) or streamable HTTP (`python -I mcp_server.py --http PORT`).

- `$MCP_TEST_STARTS=PATH`: each start appends its pid to that file;
- `$MCP_TEST_TIMES=PATH`: each start appends `start T`, and a death on `$MCP_TEST_DIE` appends
  `exit T` (T: the wall clock in seconds);
- `$MCP_TEST_EXIT_AT_START=1`: it exits (code 7, `not today` on stderr) before it speaks, every
  time (a server that never comes up);
- `$MCP_TEST_GATE=PATH`: once loaded, it makes `PATH.loaded` and waits until PATH exists before
  it speaks (a server slow to come up);
- `$MCP_TEST_DIE=PATH`: once up, whenever PATH exists it removes it, writes 42 lines to stderr
  (the last two `token: $SRV_SECRET` and `error: the index is corrupt`) and exits with code 5
  (a server that dies while idle; the restarted one lives on until PATH is made again).
"""

from __future__ import annotations

import os
import sys
import time

if __name__ == "__main__":  # before the SDK's import: a server that never comes up is quick
    if times := os.environ.get("MCP_TEST_TIMES"):
        with open(times, "a") as f:
            f.write(f"start {time.time()}\n")
    if starts := os.environ.get("MCP_TEST_STARTS"):
        with open(starts, "a") as f:
            f.write(f"{os.getpid()}\n")
    if os.environ.get("MCP_TEST_EXIT_AT_START") == "1":
        print("not today", file=sys.stderr)
        sys.exit(7)

import base64  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402

import anyio  # noqa: E402
from mcp.server.mcpserver import Context, Image, MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402

PNG = base64.b64decode(  # a 1x1 red PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==")

server = MCPServer("testsrv")


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Always fails.")
def fail(why: str = "it broke") -> str:
    raise ToolError(f"failed on purpose: {why}")


@server.tool(description="Never answers.")
async def hang() -> str:
    await anyio.sleep(3600)
    return "woke up"


@server.tool(description="A small picture.")
def picture() -> Image:
    return Image(data=PNG, format="png")


@server.tool(description="Exits the server at once.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Prints the values of the named variables to stderr, then exits.")
def leak(names: list[str]) -> str:
    print("my credentials: " + ", ".join(os.environ.get(n, "") for n in names), file=sys.stderr,
          flush=True)
    os._exit(4)


@server.tool(description="Starts a long-lived child process of the server; its pid.")
def child() -> str:
    return str(subprocess.Popen(["sleep", "600"]).pid)


@server.tool(description="What the server sees of its environment.",
             annotations=ToolAnnotations(read_only_hint=True))
def peek(names: list[str]) -> str:
    return json.dumps({"pid": os.getpid(), "env": {n: os.environ.get(n) for n in names}})


@server.tool(description="The value of one header of the request (HTTP only).")
def header(key: str, ctx: Context) -> str:
    return str((ctx.headers or {}).get(key.lower()))


if __name__ == "__main__":
    if gate := os.environ.get("MCP_TEST_GATE"):
        open(gate + ".loaded", "w").close()
        while not os.path.exists(gate):
            time.sleep(0.02)
    if die := os.environ.get("MCP_TEST_DIE"):
        def die_when_told() -> None:
            while not os.path.exists(die):
                time.sleep(0.02)
            os.remove(die)
            for i in range(40):
                print(f"loading the index: part {i}", file=sys.stderr)
            print(f"token: {os.environ.get('SRV_SECRET', 'none')}", file=sys.stderr)
            print("error: the index is corrupt", file=sys.stderr, flush=True)
            if times := os.environ.get("MCP_TEST_TIMES"):
                with open(times, "a") as f:
                    f.write(f"exit {time.time()}\n")
            os._exit(5)
        threading.Thread(target=die_when_told, daemon=True).start()
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
