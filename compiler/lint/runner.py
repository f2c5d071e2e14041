"""Lint many files: expand folders, find each file's configuration, compile, merge the findings.

A file that another linted file includes is linted twice: as part of its includer (where the
whole policy is known) and on its own as a *fragment*, where rules that need the whole policy
are left out. The same finding reached both ways is reported once. A file linted without its
includer (pre-commit passes only the changed files, an editor lints the file on save) is a
fragment too when it declares no `actions` and a policy in its folder or a folder above includes
it (includes never reach above the includer's folder), or when it says
`# policydsl: fragment`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

from compiler.lint.config import ConfigError, LintConfig, find_config, load_config
from compiler.lint.suppression import FRAGMENT_MARK
from compiler.pipeline import compile_loaded
from policydsl.diagnostics import IO_ERROR, Diagnostic, Severity, SourceCache
from policydsl import nodes as n
from policydsl.loader import POLICY_SUFFIX, LoadedPolicy, decode_source, load, load_text

STDIN = "-"   # among the paths: lint the text given as `stdin`
# Looking for a file's includers: folders above it (stopping at a repository's root), and
# policies read in each.
INCLUDER_LEVELS, INCLUDERS_PER_FOLDER = 8, 200


class UsageError(Exception):
    """A path that is not there, or a folder without policies: exit 2, no linting."""


@dataclass
class LintRun:
    files: list[str]                                   # every linted file, in the order given/found
    diagnostics: list[Diagnostic]                      # merged, deduplicated, sorted
    failing: list[Diagnostic]                          # those at or above their file's fail level
    sources: dict[str, SourceCache] = field(default_factory=dict)   # by diagnostic path
    fail_levels: dict[str, Severity] = field(default_factory=dict)  # by linted file

    @property
    def io_error(self) -> bool:
        return any(d.code == IO_ERROR.code for d in self.diagnostics)

    def by_file(self) -> dict[str, list[Diagnostic]]:
        """Diagnostics grouped by the file they point into; every linted file has an entry."""
        grouped: dict[str, list[Diagnostic]] = {path: [] for path in self.files}
        index = {os.path.normpath(path): path for path in self.files}
        for diag in self.diagnostics:
            path = diag.span.path if diag.span else self.files[0]
            grouped.setdefault(index.get(os.path.normpath(path), path), []).append(diag)
        return grouped


def collect_files(paths: list[str]) -> list[Path]:
    """Named files as they are; folders searched recursively for *.policy (hidden folders skipped)."""
    found: list[Path] = []
    seen: set[Path] = set()
    for text in paths:
        path = Path(text)
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*" + POLICY_SUFFIX)
                            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
            if not inside:
                raise UsageError(f"{text}: no {POLICY_SUFFIX} files in this folder")
        elif path.exists():
            inside = [path]
        else:
            raise UsageError(f"{text}: no such file or folder")
        for file in inside:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                found.append(file)
    return found


@functools.lru_cache(maxsize=None)
def _config_at(path: Path) -> LintConfig:
    return load_config(_display(path))


def _display(path: Path) -> Path:
    """A path relative to the working folder when it is under it, as users typed it."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def config_for(policy: Path, explicit: Path | None = None) -> LintConfig:
    """The configuration for one policy file: `explicit`, else the nearest .policydsl.yaml, else defaults."""
    path = explicit or find_config(policy)
    return _config_at(path.resolve()) if path is not None else LintConfig()


def marked_fragment(loaded: LoadedPolicy) -> bool:
    """Whether the file says `# policydsl: fragment` in a comment."""
    return loaded.main is not None and any(FRAGMENT_MARK.match(c.text.rstrip()) for c in loaded.main.comments)


def _declares_actions(loaded: LoadedPolicy) -> bool:
    return any(isinstance(item, n.Actions) for item in loaded.items())


def included_nearby(file: Path, cache: dict[Path, frozenset[Path]] | None = None) -> Path | None:
    """A policy in `file`'s folder or a folder above that includes it (directly or through another
    file), or None. An includer's includes stay in its own folder and below, so no other can.
    `cache` keeps each policy's includes, by resolved path, across calls."""
    cache = {} if cache is None else cache
    target = file.resolve()
    folder = target.parent
    for _ in range(INCLUDER_LEVELS):
        candidates = sorted(p for p in folder.glob("*" + POLICY_SUFFIX) if p.is_file())
        for candidate in candidates[:INCLUDERS_PER_FOLDER]:
            key = candidate.resolve()
            if key == target:
                continue
            if key not in cache:
                cache[key] = frozenset(Path(p).resolve() for p in load(candidate).paths) - {key}
            if target in cache[key]:
                return candidate
        if (folder / ".git").exists() or folder.parent == folder:
            break
        folder = folder.parent
    return None


def is_fragment(file: Path, loaded: LoadedPolicy, included: set[Path],
                cache: dict[Path, frozenset[Path]] | None = None) -> bool:
    """Whether `file` is linted as a fragment: included by another linted file, marked, or a file
    without actions that a policy around it includes."""
    if file.resolve() in included or marked_fragment(loaded):
        return True
    return loaded.main is not None and not _declares_actions(loaded) and included_nearby(file, cache) is not None


def lint_paths(paths: list[str], *, config_file: str | None = None, select: frozenset[str] | None = None,
               ignore: frozenset[str] = frozenset(), fail_level: Severity | None = None,
               stdin: bytes = b"", stdin_filename: str | None = None) -> LintRun:
    """Lint files and folders. Raises UsageError for missing paths, ConfigError for a bad config.
    `-` among the paths lints `stdin` as if it were the file `stdin_filename` (default `<stdin>`
    in the working folder): its includes and its configuration are found from there."""
    files = collect_files([p for p in paths if p != STDIN])
    explicit = Path(config_file) if config_file else None
    if explicit is not None and not explicit.is_file():
        raise UsageError(f"{config_file}: no such configuration file")
    loaded: dict[Path, LoadedPolicy] = {file: load(file) for file in files}
    if STDIN in paths:
        name = Path(stdin_filename or "<stdin>")
        if any(file.resolve() == name.resolve() for file in files):
            raise UsageError(f"{name}: named both as a file and as --stdin-filename")
        text, problem = decode_source(stdin, str(name))
        loaded[name] = load_text(text, str(name)) if problem is None else LoadedPolicy(main=None, diagnostics=[problem])
        files.append(name)
    _config_at.cache_clear()  # a long-lived process (tests, an editor) must see edited files
    configs = {file: config_for(file, explicit).with_overrides(select=select, ignore=ignore, fail_level=fail_level)
               for file in files}
    included = {Path(p).resolve() for file, result in loaded.items() for p in result.paths
                if Path(p).resolve() != file.resolve()}

    run = LintRun(files=[str(f) for f in files], diagnostics=[], failing=[])
    includes: dict[Path, frozenset[Path]] = {
        file.resolve(): frozenset(Path(p).resolve() for p in result.paths) - {file.resolve()}
        for file, result in loaded.items()}
    seen: set[tuple] = set()
    for file in files:
        config = configs[file]
        if is_fragment(file, loaded[file], included, includes):
            config = dataclasses.replace(config, fragment=True)
        result = compile_loaded(loaded[file], config=config)
        run.fail_levels[str(file)] = config.fail_level
        for diag in result.diagnostics:
            key = (diag.code, diag.span, diag.message)
            if key in seen:
                continue
            seen.add(key)
            run.diagnostics.append(diag)
            if diag.severity >= config.fail_level:
                run.failing.append(diag)
            if diag.span is not None:
                run.sources.setdefault(diag.span.path, result.sources)
    run.diagnostics.sort(key=Diagnostic.sort_key)
    return run


__all__ = ["LintRun", "UsageError", "ConfigError", "STDIN", "collect_files", "config_for", "lint_paths"]
