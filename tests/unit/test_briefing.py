"""The briefing's pieces without the daemon: instruction files (which, in what order, imports
and their bounds, the cap), folder files on first touch, the environment block and its updates,
the time bound of the gathering, and git kept from running what a repository's config names."""

from __future__ import annotations

import os
import subprocess
from datetime import date
from pathlib import Path

import anyio
import pytest

from heddle.briefing import environment as env
from heddle.briefing import git
from heddle.briefing.gather import gather
from heddle.briefing.instructions import (IMPORT_DEPTH, imports, nested, nested_seen,
                                          read_instructions, render)
from heddle.model.limits import knowledge_cutoff


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A repository `repo` (a `.git` folder) with the workspace `repo/pkg`, and a config folder."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg" / "sub" / "deep").mkdir(parents=True)
    config = tmp_path / "config" / "heddle"
    config.mkdir(parents=True)
    return repo / "pkg", config


def names(found) -> list[str]:
    return [f"{f.scope}:{f.path.parent.name}/{f.path.name}" for f in found.files]


def test_files_from_the_user_and_the_root_down_to_the_workspace_agents_md_first(tree):
    ws, config = tree
    repo = ws.parent
    (config / "AGENTS.md").write_text("MINE")
    (repo / "AGENTS.md").write_text("ROOT")
    (repo / "CLAUDE.md").write_text("SHADOWED by the folder's AGENTS.md")
    (ws / "CLAUDE.md").write_text("PKG")
    (ws / "sub" / "AGENTS.md").write_text("LATER: below the workspace")
    found = read_instructions(ws, config)
    assert names(found) == ["user:heddle/AGENTS.md", "project:repo/AGENTS.md",
                            "project:pkg/CLAUDE.md"]
    assert [f.rank for f in found.files] == [0, 1, 2]
    block = render(found)
    assert block.index("MINE") < block.index("ROOT") < block.index("PKG")
    assert "SHADOWED" not in block and "LATER" not in block
    assert "deeper folder over one in a folder above it" in block


def test_no_files_no_block(tree):
    ws, config = tree
    assert render(read_instructions(ws, config)) is None


def test_imports_inside_the_workspace_and_the_config_folder_only(tree, tmp_path):
    ws, config = tree
    (ws / "docs").mkdir()
    (ws / "docs" / "style.md").write_text("style @../more.md")
    (ws / "more.md").write_text("more")
    (tmp_path / "secret.txt").write_text("SECRET")
    (ws / "escape.md").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(ws / "pipe.md")
    (ws / "AGENTS.md").write_text(
        "See @docs/style.md, mail me at a@b.example, not `@code/x.md`.\n"
        "@escape.md @pipe.md @/etc/hostname @missing/file.md\n```\n@fenced/out.md\n```\n")
    found = read_instructions(ws, config)
    assert names(found) == ["project:pkg/AGENTS.md", "import:docs/style.md", "import:pkg/more.md"]
    text = render(found)
    assert "SECRET" not in text
    notes = "\n".join(found.notes)
    assert "escape.md: it leads outside the workspace" in notes
    assert "pipe.md" in notes and "named pipe" in notes
    assert "/etc/hostname: it leads outside" in notes


def test_imports_nest_only_so_deep_and_a_cycle_ends(tree):
    ws, config = tree
    chain = [ws / f"f{i}.md" for i in range(IMPORT_DEPTH + 2)]
    for here, there in zip(chain, chain[1:]):
        here.write_text(f"{here.name} @{there.name}")
    chain[-1].write_text("last @f0.md @AGENTS.md")
    (ws / "AGENTS.md").write_text("start @f0.md")
    found = read_instructions(ws, config)
    assert [f.path.name for f in found.files] == ["AGENTS.md"] + [p.name for p in chain[:IMPORT_DEPTH]]
    assert any(f"imports nest at most {IMPORT_DEPTH} deep" in n for n in found.notes)


def test_the_import_syntax():
    assert imports("@a.md and @dir/b and (@c/d.md), x@y.z `@e.md` @word @./f.md") == [
        "a.md", "dir/b", "c/d.md", "./f.md"]


def test_the_cap_keeps_the_deepest_files_and_names_what_it_cut(tree):
    ws, config = tree
    (config / "AGENTS.md").write_text("u" * 100)
    (ws.parent / "AGENTS.md").write_text("r" * 100)
    (ws / "AGENTS.md").write_text("w" * 100)
    found = read_instructions(ws, config, cap=150)
    assert [(len(f.text), f.truncated) for f in found.files] == [(0, True), (50, True), (100, False)]
    assert len(found.notes) == 2
    assert "only its first 50 of 100 bytes" in found.notes[0]
    assert "heddle/AGENTS.md: left out (100 bytes)" in found.notes[1]
    block = render(found)
    assert "u" * 10 not in block and "Note: instruction files are capped" in block


def test_a_folder_below_the_workspace_is_given_once_on_first_touch(tree):
    ws, config = tree
    (ws / "sub" / "AGENTS.md").write_text("sub rules")
    (ws / "sub" / "deep" / "CLAUDE.md").write_text("deep rules")
    found = read_instructions(ws, config)
    seen: set[Path] = set()
    first = nested(found, ws / "sub" / "a.py", seen)
    assert "sub rules" in first and "deep rules" not in first
    assert nested(found, ws / "sub" / "b.py", seen) is None
    deep = nested(found, ws / "sub" / "deep" / "c.py", seen)
    assert "deep rules" in deep and "sub rules" not in deep
    assert nested(found, ws / "top.py", seen) is None
    assert nested(found, ws.parent / "elsewhere.py", seen) is None
    # a conversation that holds them (a loaded session) does not get them again
    assert nested_seen([first, deep]) == {ws / "sub", ws / "sub" / "deep"}


async def test_the_gathering_leaves_out_what_is_not_ready_in_time():
    never = anyio.Event()

    async def slow():
        await never.wait()  # a repository whose git never answers

    async def quick():
        return "ready"

    async def broken():
        raise FileNotFoundError("git")

    with anyio.fail_after(10):  # the gathering itself must end, whatever its sources do
        got = await gather({"slow": slow, "quick": quick, "broken": broken}, 0.05)
    assert got.values == {"quick": "ready"}
    assert got.late == ("slow",) and got.failed == ("broken",)


def test_the_environment_block_and_its_updates():
    e = env.Environment("/w", "Linux 6", "/bin/zsh", "2026-12-02", "claude-sonnet-4-5",
                        knowledge_cutoff("claude-sonnet-4-5-20250929"),
                        git.Repo("/w", "feature"), "main", git.Status((" M a.py",), 3),
                        ("abc123 Fix it (Ann, 2026-12-01)",), ("git status",))
    text = env.render(e)
    for line in ("Workspace: /w", "Platform: Linux 6", "Shell: /bin/zsh",
                 "Today's date: 2026-12-02",
                 "Model: claude-sonnet-4-5 (reliable knowledge up to January 2025)",
                 "Current branch: feature", "usually the base of pull requests): main",
                 "(3 more left out):\n   M a.py", "abc123 Fix it",
                 "so left out: git status"):
        assert line in text
    said = env.said(["hello", text])
    assert said == ("2026-12-02", "claude-sonnet-4-5")
    assert env.update(said, "2026-12-02", "claude-sonnet-4-5", None) is None
    later = env.update(said, "2026-12-03", "claude-sonnet-4-5", None)
    assert "Today's date: 2026-12-03" in later and "Model" not in later
    assert env.said([text, later]) == ("2026-12-03", "claude-sonnet-4-5")
    assert env.said(["a summary of the conversation"]) is None


def test_a_model_without_a_recorded_cutoff_says_so():
    assert knowledge_cutoff("claude-opus-4-7") is None
    assert knowledge_cutoff("claude-opus-4-20250514") == "January 2025"
    assert "knowledge cutoff not recorded" in env.model_line("local-model", None)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
                   cwd=repo, check=True, capture_output=True, timeout=30)


def _out(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          timeout=30).stdout.strip()


async def test_a_hostile_git_config_runs_nothing(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "work")
    (repo / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    (repo / "a.txt").write_text("hello\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    # a commit that looks signed: `log.showSignature` would have gpg.program check it
    tree = _out(repo, "rev-parse", "HEAD^{tree}")
    head = _out(repo, "rev-parse", "HEAD")
    signed = (f"tree {tree}\nparent {head}\nauthor T <t@example.com> 1700000000 +0000\n"
              "committer T <t@example.com> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----"
              "\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned\n")
    commit = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=repo,
                            input=signed, capture_output=True, text=True, check=True,
                            timeout=30).stdout.strip()
    _git(repo, "update-ref", "HEAD", commit)
    marks = tmp_path / "marks"
    marks.mkdir()
    hooks = repo / "hooks"
    hooks.mkdir()
    for hook in ("post-index-change", "pre-commit", "reference-transaction", "gpg"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marks}/{hook}\n")  # (gpg: gpg.program)
        (hooks / hook).chmod(0o755)
    # (quoted: an unquoted `;` starts a comment in git's config)
    run = lambda name: f"\"sh -c 'touch {marks}/{name}; cat'\""  # noqa: E731
    with open(repo / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = {run('fsmonitor')}\n\tpager = {run('pager')}\n"
                f"\thooksPath = {hooks}\n\tsshCommand = {run('ssh')}\n"
                f"[filter \"evil\"]\n\tclean = {run('clean')}\n\tsmudge = {run('smudge')}\n"
                f"\tprocess = {run('process')}\n"
                f"[diff]\n\texternal = {run('external')}\n"
                f"[diff \"evil\"]\n\ttextconv = {run('textconv')}\n"
                f"[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {hooks / 'gpg'}\n"
                f"[status]\n\tsubmoduleSummary = true\n")
    # the same size and a new mtime: git must read the file again to tell, through its filter
    later = os.stat(repo / "a.txt").st_mtime + 100
    os.utime(repo / "a.txt", (later, later))
    e = await env.environment(repo, "m", None, date(2026, 12, 2), bound=20)
    assert sorted(p.name for p in marks.iterdir()) == []
    assert e.repo == git.Repo(str(repo), "work")
    assert e.status is not None and e.commits is not None and len(e.commits) == 2
    assert e.left_out == ()
