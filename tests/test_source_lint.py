"""Pyflakes' rules on our own sources, through Ruff (`[tool.ruff]` in pyproject.toml): an
undefined name in a path the tests do not reach is a NameError in production, an unused import a
stale dependency between modules. The same configuration is also run on a file made to break it,
to show the check can fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def ruff() -> str:
    found = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    assert Path(found).exists(), "ruff is one of the test extras: pip install -e '.[test]'"
    return found


def test_our_sources_pass_pyflakes_rules():
    run = subprocess.run([ruff(), "check", "--output-format", "concise", "."], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_undefined_name_and_an_unused_import_fail_the_check(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    (tmp_path / "broken.py").write_text("import os\n\n\ndef answer():\n    return missing_name\n")
    run = subprocess.run([ruff(), "check", "--output-format", "concise", "."], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 1
    assert "broken.py:1:8: F401" in run.stdout and "broken.py:5:12: F821" in run.stdout, run.stdout
