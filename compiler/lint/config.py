"""Lint configuration: which rules run, at what severity, and what fails a run.

Read from `.policydsl.yaml`, found by walking up from each policy file (the nearest wins):

    lint:
      disable: [PD305]            # codes or rule names never reported
      select: [PD201, PD202]      # when given, only these rules run
      severity: {PD402: error}    # re-grade a rule
      fail_level: warning         # `policydsl lint` exits 1 at this severity or above

`lint:` is the file's only section: any other top-level key is an error (as Ruff rejects an
unknown setting), since a misplaced `disable:` would otherwise lint as if the file were not
there. A malformed file is a `ConfigError` pointing at the offending line of the YAML.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml
from cerberus import Validator
from cerberus.errors import UNKNOWN_FIELD

from compiler.lint.registry import RULES, is_configurable, resolve_code
from policydsl.diagnostics import (
    CODES,
    CodeInfo,
    Diagnostic,
    Severity,
    Span,
    closest,
    make,
    register_code,
)

CONFIG_FILE = ".policydsl.yaml"

BAD_CONFIG = register_code(CodeInfo(
    "PD200", "bad-lint-config", Severity.ERROR, "the lint configuration file is malformed",
    why="A configuration that cannot be read would silently lint with other rules than intended.",
    fix="Correct the file; see the `lint:` keys in docs/lint-rules.md.",
))


@dataclass(frozen=True)
class LintConfig:
    disabled: frozenset[str] = frozenset()
    select: frozenset[str] | None = None
    severity: Mapping[str, Severity] = field(default_factory=dict)
    fail_level: Severity = Severity.ERROR
    # Lint an included file on its own: rules that need the whole policy are left to its includer.
    fragment: bool = False
    source: str | None = None       # the file this configuration was read from

    def enabled(self, code: str) -> bool:
        if not is_configurable(code):
            return True
        if code in self.disabled:
            return False
        return self.select is None or code not in RULES or code in self.select

    def regrade(self, diag: Diagnostic) -> Diagnostic:
        severity = self.severity.get(diag.code)
        if severity is None or severity == diag.severity:
            return diag
        return dataclasses.replace(diag, severity=severity)

    def with_overrides(self, *, select: frozenset[str] | None = None, ignore: frozenset[str] = frozenset(),
                       fail_level: Severity | None = None) -> "LintConfig":
        """Command-line options on top of the file: --select replaces, --ignore adds."""
        return dataclasses.replace(
            self,
            select=select if select is not None else self.select,
            disabled=self.disabled | ignore,
            fail_level=fail_level if fail_level is not None else self.fail_level,
        )


class ConfigError(Exception):
    def __init__(self, diagnostic: Diagnostic):
        self.diagnostic = diagnostic
        super().__init__(f"{diagnostic.span}: {diagnostic.message}")


def check_code(text: Any) -> tuple[str | None, str | None]:
    """(code, None) for a configurable code or rule name, else (None, why not)."""
    if not isinstance(text, str):
        return None, f"`{text}` is not a code"
    code = resolve_code(text)
    if code is None:
        suggestion = closest(text.upper(), list(CODES)) or closest(text, [i.name for i in CODES.values()])
        return None, f"unknown code `{text}`" + (f"; did you mean `{suggestion}`?" if suggestion else "")
    if not is_configurable(code):
        what = "leaves the plan ambiguous or impossible" if code in RULES else "is a compile error"
        return None, f"{code} ({CODES[code].name}) {what} and cannot be disabled or re-graded"
    return code, None


_LEVELS = ["info", "warning", "error"]
# Ruff's names for the same settings, which a Ruff user may write here.
_RUFF_NAMES = {"ignore": "disable", "extend-ignore": "disable", "extend-select": "select"}
_CODE_LIST = {"type": "list", "schema": {"type": "string"}, "nullable": True}
_SCHEMA = {
    "lint": {
        "type": "dict", "nullable": True, "allow_unknown": False,
        "schema": {
            "disable": _CODE_LIST,
            "select": _CODE_LIST,
            "severity": {"type": "dict", "nullable": True, "keysrules": {"type": "string"},
                         "valuesrules": {"type": "string", "allowed": _LEVELS}},
            "fail_level": {"type": "string", "allowed": _LEVELS, "nullable": True},
        },
    },
}


def _marks(node: yaml.Node, path: tuple = ()) -> dict[tuple, yaml.Node]:
    """Every value node by its path, and every mapping key by path + ("<key>",)."""
    out = {path: node}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            out[(*path, key.value, "<key>")] = key
            out.update(_marks(value, (*path, key.value)))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out.update(_marks(item, (*path, i)))
    return out


def _span(path: str, node: yaml.Node | None) -> Span:
    if node is None:
        return Span.point(path, 1, 1)
    start, end = node.start_mark, node.end_mark
    if end.line != start.line:
        return Span(path, start.line + 1, start.column + 1, start.line + 1, start.column + 2)
    return Span(path, start.line + 1, start.column + 1, end.line + 1, max(end.column + 1, start.column + 2))


def parse_config(text: str, path: str = CONFIG_FILE) -> LintConfig:
    def fail(message: str, node: yaml.Node | None, hint: str | None = None) -> ConfigError:
        return ConfigError(make(BAD_CONFIG, message, _span(path, node), hint))

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        span = Span.point(path, mark.line + 1, mark.column + 1) if mark else Span.point(path, 1, 1)
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(make(BAD_CONFIG, f"not valid YAML: {problem}", span)) from None
    if data is None:
        return LintConfig(source=path)
    if not isinstance(data, dict):
        raise fail("the file must be a mapping with a `lint:` key", root)
    nodes = _marks(root)
    validator = Validator(_SCHEMA, allow_unknown=False)
    if not validator.validate(data):
        err = _first_error(validator._errors)
        where = tuple(err.document_path)
        node = nodes.get((*where, "<key>")) if err.code == UNKNOWN_FIELD.code else nodes.get(where)
        hint = None
        if err.code == UNKNOWN_FIELD.code:
            meant = _RUFF_NAMES.get(where[-1], where[-1])
            if meant in _SCHEMA["lint"]["schema"] and where != ("lint", meant):
                hint = f"did you mean `{meant}:` under `lint:`?"
        raise fail(_describe(err), node or nodes.get(where[:-1]), hint)
    section = data.get("lint") or {}
    codes: dict[str, list[str]] = {}
    for key in ("disable", "select"):
        codes[key] = []
        for i, text_code in enumerate(section.get(key) or []):
            code, problem = check_code(text_code)
            if problem:
                raise fail(problem, nodes.get(("lint", key, i)))
            codes[key].append(code)
    severity: dict[str, Severity] = {}
    for text_code, level in (section.get("severity") or {}).items():
        code, problem = check_code(text_code)
        if problem:
            raise fail(problem, nodes.get(("lint", "severity", text_code, "<key>")))
        severity[code] = Severity.parse(level)
    fail_level = section.get("fail_level")
    return LintConfig(
        disabled=frozenset(codes["disable"]),
        select=frozenset(codes["select"]) if section.get("select") is not None else None,
        severity=severity,
        fail_level=Severity.parse(fail_level) if fail_level else Severity.ERROR,
        source=path,
    )


def _first_error(errors):
    for err in errors:
        if err.is_group_error and err.child_errors:
            return _first_error(err.child_errors)
        return err
    raise AssertionError("validation failed without an error")


def _describe(err) -> str:
    from cerberus import errors as ce

    field_name = err.field
    if err.code == ce.UNKNOWN_FIELD.code and len(err.document_path) == 1:
        return f"unknown top-level key `{field_name}`; the file's only section is `lint:`"
    if err.code == ce.UNKNOWN_FIELD.code:
        return f"unknown key `{field_name}` under `lint:`; use disable, select, severity or fail_level"
    if err.code == ce.UNALLOWED_VALUE.code:
        return f"`{err.value}` is not a severity; use info, warning or error"
    if err.code == ce.BAD_TYPE.code:
        wanted = {"list": "a list of codes", "dict": "a mapping", "string": "a string"}.get(err.constraint, err.constraint)
        return f"`{field_name}` must be {wanted}"
    return f"`{field_name}`: invalid value"


def load_config(path: str | Path) -> LintConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ConfigError(make(BAD_CONFIG, f"cannot read {path}: {reason}", Span.point(str(path), 1, 1))) from None
    return parse_config(text, str(path))


def find_config(policy_path: str | Path) -> Path | None:
    """The nearest `.policydsl.yaml` in the policy's folder or any folder above it."""
    folder = Path(policy_path).resolve()
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        config = candidate / CONFIG_FILE
        if config.is_file():
            return config
    return None
