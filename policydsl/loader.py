"""Reading policy files from disk: encoding, includes, and the sources diagnostics quote.

`load(path)` gives a `LoadedPolicy`: the main file's AST and every included file's AST,
in include order, or the diagnostics that stopped it. A `--policy` folder means its
`main.policy` (or its only top-level `.policy` file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from policydsl import nodes as n
from policydsl.diagnostics import (
    BAD_ENCODING,
    INCLUDE_ERROR,
    IO_ERROR,
    Diagnostic,
    Severity,
    TOO_LARGE,
    SourceCache,
    Span,
    make,
)
from policydsl.limits import MAX_INCLUDE_DEPTH, MAX_POLICY_BYTES, describe_bytes
from policydsl.parser import parse_text

POLICY_SUFFIX = ".policy"


@dataclass
class LoadedPolicy:
    """A main policy and the files it includes (depth-first, each once), ready to compile."""

    main: n.Policy | None
    files: list[n.Policy] = field(default_factory=list)  # included files first, main last
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: SourceCache = field(default_factory=SourceCache)
    # The main file's folder: its includes are confined to it and below it (a policy names files
    # of its own, never /etc/passwd or a ServiceAccount token, which a diagnostic would quote).
    root: Path = field(default_factory=lambda: Path.cwd().resolve())

    def confines(self, path: str | Path) -> bool:
        """Whether `path` (symlinks followed) lies in the policy's folder or below it."""
        return Path(path).resolve().is_relative_to(self.root)

    @property
    def ok(self) -> bool:
        return self.main is not None and not any(d.severity >= Severity.ERROR for d in self.diagnostics)

    @property
    def paths(self) -> list[str]:
        return [p.path for p in self.files]

    def items(self):
        """Every item of every file, includes first, as one policy."""
        for policy in self.files:
            yield from policy.items


def read_limited(stream: BinaryIO) -> bytes:
    """A policy's bytes from `stream`, and one more if there are more than a policy may hold:
    enough for decode_source to tell, without reading an endless stream (a device, a pipe) to its end."""
    return stream.read(MAX_POLICY_BYTES + 1)


def read_source(path: Path) -> tuple[str | None, Diagnostic | None]:
    try:
        with open(path, "rb") as stream:
            data = read_limited(stream)
    except IsADirectoryError:
        return None, make(IO_ERROR, f"{path} is a folder, not a policy file", Span.point(str(path), 1, 1))
    except OSError as err:
        return None, make(IO_ERROR, f"cannot read {path}: {err.strerror or err}", Span.point(str(path), 1, 1))
    return decode_source(data, str(path))


def decode_source(data: bytes, path: str) -> tuple[str | None, Diagnostic | None]:
    """Bytes to text; or a PD004 diagnostic when there are too many of them, or a PD002 one at the
    line and column of the first bad byte."""
    if len(data) > MAX_POLICY_BYTES:
        return None, make(TOO_LARGE, f"the file is larger than {describe_bytes(MAX_POLICY_BYTES)}, the most one "
                          "policy (its files together) may hold", Span.point(path, 1, 1),
                          "move generated queues out of the policy, or make fewer and larger ones")
    try:
        # A byte-order mark (left by some Windows editors) is not part of the text.
        return data.decode("utf-8").removeprefix("\ufeff"), None
    except UnicodeDecodeError as err:
        # Everything before the first bad byte decodes; columns count characters, as Lark's do.
        before = data[: err.start].decode("utf-8")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        return None, make(BAD_ENCODING, f"invalid UTF-8 byte 0x{data[err.start]:02x}",
                          Span.point(path, line, column), "save the file as UTF-8")


def resolve_policy_path(path: Path) -> Path:
    """A folder stands for its main policy: `main.policy`, else its only `.policy` file."""
    if not path.is_dir():
        return path
    main = path / "main.policy"
    if main.exists():
        return main
    candidates = sorted(p for p in path.glob("*" + POLICY_SUFFIX) if p.is_file())
    if len(candidates) == 1:
        return candidates[0]
    return main


def load(path: str | Path) -> LoadedPolicy:
    return _Loader().load_main(Path(path))


def load_text(text: str, path: str = "<string>") -> LoadedPolicy:
    """Load from a string (tests, stdin). Includes resolve relative to the current folder."""
    return _Loader().load_main(Path(path), text=text)


class _Loader:
    def __init__(self) -> None:
        self.result = LoadedPolicy(main=None)
        self.loaded: set[Path] = set()
        # What the files still to read may hold together (read here, so a test can lower the limit).
        self.remaining = MAX_POLICY_BYTES

    def load_main(self, path: Path, text: str | None = None) -> LoadedPolicy:
        path = resolve_policy_path(path)
        self.result.root = path.parent.resolve()
        policy = self._load_file(path, text, stack=(), include_span=None)
        self.result.main = policy
        self.result.diagnostics.sort(key=Diagnostic.sort_key)
        return self.result

    def _load_file(self, path: Path, text: str | None, stack: tuple[Path, ...],
                   include_span: Span | None) -> n.Policy | None:
        key = path.resolve() if text is None else path
        if text is None:
            text, problem = read_source(path)
            if problem is not None:
                if include_span is not None:
                    # Said at the include, the line the user can change; a size keeps its own code.
                    problem = make(TOO_LARGE if problem.code == TOO_LARGE.code else INCLUDE_ERROR,
                                   problem.message, include_span)
                self.result.diagnostics.append(problem)
                return None
        # The limit holds for the policy, not per file: splitting a policy must not multiply it.
        # Checked before the file is parsed, so the parser never sees more than the limit in all.
        size = len(text.encode("utf-8"))
        if size > self.remaining:
            message = (f"with {path} the policy is larger than {describe_bytes(MAX_POLICY_BYTES)}, the most one policy "
                       "(its files together) may hold")
            self.result.diagnostics.append(make(TOO_LARGE, message, include_span or Span.point(str(path), 1, 1),
                                                "move generated queues out of the policy, or make fewer and "
                                                "larger ones"))
            return None
        self.remaining -= size
        self.result.sources.add(str(path), text)
        parsed = parse_text(text, str(path))
        self.result.diagnostics.extend(parsed.diagnostics)
        if parsed.policy is None:
            return None
        self.loaded.add(key)
        for include in parsed.policy.of_type(n.Include):
            target = (path.parent / include.path.value)
            resolved = target.resolve()
            if not self.result.confines(resolved):
                self.result.diagnostics.append(make(
                    INCLUDE_ERROR, f"include \"{include.path.value}\" is outside the policy's folder {self.result.root}",
                    include.path.span, "keep the policy's files in its folder or below it"))
                continue
            if resolved in stack or resolved == key:
                chain = " -> ".join(str(p) for p in (*stack, key, resolved))
                self.result.diagnostics.append(make(INCLUDE_ERROR, f"include cycle: {chain}", include.path.span))
                continue
            if resolved in self.loaded:
                continue  # included twice through different paths: once is enough
            if len(stack) + 2 > MAX_INCLUDE_DEPTH:
                # The loader recurses per file: a longer chain would end in a RecursionError.
                self.result.diagnostics.append(make(
                    INCLUDE_ERROR, f"includes nested more than {MAX_INCLUDE_DEPTH} files deep "
                    f"(from {stack[0] if stack else key})", include.path.span,
                    "include the files from one main file instead of each from the one before"))
                continue
            self._load_file(target, None, (*stack, key), include.path.span)
        self.result.files.append(parsed.policy)
        return parsed.policy
