"""Where a command's result goes: `--output-file FILE`, or standard output."""

from __future__ import annotations

import sys


def emit(text: str, path: str | None) -> bool:
    """Write `text` to `path` (or stdout when None). False, with the reason on stderr, if the
    file cannot be written: the caller exits 2 (an I/O error)."""
    if not path:
        sys.stdout.write(text)
        return True
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as err:
        print(f"policydsl: cannot write {path}: {err.strerror or err}", file=sys.stderr)
        return False
    return True
