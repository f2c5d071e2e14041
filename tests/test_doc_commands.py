"""Every `policydsl` command the README and docs show in a code block runs as written (issue 32:
"every doc example run by a test"): a renamed flag, a moved file or a command that now fails
turns this test red. Commands that need a live cluster or a long-running process (`run`,
`dashboard`, `dev-cluster`, `--kubeconfig`, `--scheduler`) and those written with placeholders
(POLICY, NS/NAME, a file the reader is to supply) are listed with why they are not run; a file
the doc tells the reader to save (`Save it as two-teams.policy`) is saved from the block above.
Each command runs in a scratch folder holding copies of what it reads, so `fmt --write` or
`--report out/` never touch the checkout."""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from policydsl.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "lint-rules.md")]
FENCE = re.compile(r"```(?P<lang>[a-z]*)\n(?P<body>.*?)```", re.S)
LIVE = {"run", "dashboard", "dev-cluster"}
LIVE_FLAGS = {"--kubeconfig", "--scheduler", "--scheduler-service"}
PLACEHOLDER = re.compile(r"^(POLICY|NS/NAME|[A-Z]|[A-Z]+\.\w+)$|\.\.\.|^\[")
SAVE_AS = re.compile(r"Save it as `([^`]+)`")
# Exit 1 is a finding for these (a difference for diff): the docs show them on purpose.
MAY_FIND = {"diff"}


@dataclass(frozen=True)
class DocCommand:
    doc: str
    line: int
    argv: tuple[str, ...]
    saved: dict            # file name -> text the doc tells the reader to save

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def commands() -> list[DocCommand]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for fence in FENCE.finditer(text):
            if fence.group("lang") not in ("", "bash", "sh", "console", "shell"):
                continue
            start = text.count("\n", 0, fence.start()) + 2
            before = text[:fence.start()]
            saved = {}
            said = SAVE_AS.findall(before[-400:])
            policy = list(re.finditer(r"```policy\n(.*?)```", before, re.S))
            if said and policy:
                saved[said[-1]] = policy[-1].group(1)
            for offset, raw in enumerate(fence.group("body").splitlines()):
                line = raw.strip().removeprefix("$ ")
                for prefix in ("python -m policydsl ", "policydsl "):
                    if line.startswith(prefix):
                        words = shlex.split(line[len(prefix):].split(" > ")[0], comments=True)
                        out.append(DocCommand(doc.relative_to(ROOT).as_posix(), start + offset, tuple(words), saved))
    return out


def why_not_run(command: DocCommand) -> str | None:
    argv = command.argv
    if not argv or argv[0] in LIVE:
        return "needs a cluster or runs until stopped"
    if LIVE_FLAGS & set(argv):
        return "asks a live cluster or scheduler"
    if any(PLACEHOLDER.search(word) for word in argv):
        return "written with placeholders"
    for word in argv[1:]:
        if word.startswith("-") or "/" not in word and "." not in word:
            continue
        if word in command.saved or (ROOT / word).exists() or _is_output(argv, word):
            continue
        return f"reads `{word}`, which the reader supplies"
    return None


def _is_output(argv: tuple[str, ...], word: str) -> bool:
    i = argv.index(word)
    return i > 0 and argv[i - 1] in ("--report", "--output-file", "--snapshot-out")


ALL = commands()


def test_the_docs_show_commands_that_this_test_runs():
    runnable = [c for c in ALL if why_not_run(c) is None]
    assert runnable, "no runnable command found: the extraction is broken"
    assert {c.argv[0] for c in runnable} >= {"lint", "fmt", "simulate", "test", "compile"}


@pytest.mark.parametrize("command", [c for c in ALL if why_not_run(c) is None], ids=lambda c: c.id)
def test_a_documented_command_runs_as_written(command: DocCommand, tmp_path: Path, monkeypatch, capsys):
    for word in command.argv[1:]:
        top = word.split("/")[0]
        if not word.startswith("-") and (ROOT / top).exists() and not (tmp_path / top).exists():
            source = ROOT / top
            (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / top)
    for name, text in command.saved.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    code = main(list(command.argv))
    out = capsys.readouterr()
    assert "internal error" not in out.err and "Traceback" not in out.err
    allowed = (0, 1) if command.argv[0] in MAY_FIND else (0,)
    assert code in allowed, f"{command.id}: policydsl {' '.join(command.argv)} exited {code}\n{out.err[-2000:]}"
