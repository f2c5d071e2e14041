"""Cerberus schemas of the IR, built from the catalog, and validation mapped back to source.

Validation also normalizes: every argument, flag and setting the policy leaves out gets its
catalog default, so the Plan is complete and explicit.
"""

from __future__ import annotations

import functools
import threading

from cerberus import Validator
from cerberus.errors import BasicErrorHandler

from compiler import catalog as cat
from compiler import codes
from compiler.lower import IRPath, Lowered
from policydsl.diagnostics import Diagnostic, make


def _argument_schema(arguments: tuple[cat.Argument, ...]) -> dict:
    schema = {}
    for arg in arguments:
        rule = cat.cerberus_rule(arg)
        rule["default"] = arg.default
        schema[arg.name] = rule
    return schema


def _flags_schema(points: frozenset[str]) -> dict:
    return {f.name: {"type": "boolean", "default": f.default} for f in cat.FLAGS if f.name in points}


@functools.lru_cache(maxsize=None)
def plugin_schema(name: str) -> dict:
    spec = cat.PLUGINS[name]
    return {
        "name": {"type": "string", "allowed": [name], "required": True},
        "weight": {"type": "number", "min": 0, "nullable": True,
                   "default": spec.default_weight if spec.scores else None},
        "flags": {"type": "dict", "schema": _flags_schema(spec.points), "default": {}},
        "arguments": {"type": "dict", "schema": _argument_schema(spec.arguments), "default": {}},
    }


@functools.lru_cache(maxsize=1)
def top_schema() -> dict:
    return {
        "name": {"type": "string", "required": True, "empty": False},
        "version": {"type": "integer", "allowed": [1], "required": True},
        "actions": {"type": "list", "schema": {"type": "string", "allowed": list(cat.ACTIONS)}, "required": True},
        "action_arguments": {
            "type": "dict", "default": {},
            "schema": {name: {"type": "dict", "schema": _argument_schema(spec.arguments), "default": {}}
                       for name, spec in cat.ACTIONS.items()},
        },
        "tiers": {"type": "list", "default": [], "schema": {"type": "dict", "schema": {
            "label": {"type": "string", "nullable": True, "default": None},
            "plugins": {"type": "list", "schema": {"type": "dict", "allow_unknown": True}},
        }}},
        "queues": {"type": "list", "default": [], "schema": {"type": "dict", "schema": {
            "name": {"type": "string", "required": True, "empty": False},
            "parent": {"type": "string", "nullable": True, "required": True},
            **_argument_schema(cat.QUEUE_SETTINGS),
        }}},
        "devices": {"type": "list", "default": [], "schema": {"type": "dict", "schema": {
            "resource": {"type": "string", "required": True, "empty": False},
            **_argument_schema(cat.DEVICE_SETTINGS),
        }}},
    }


def _flatten(errors) -> list:
    out = []
    for err in errors:
        if err.is_group_error and err.child_errors:
            out.extend(_flatten(err.child_errors))
        else:
            out.append(err)
    return out


_MESSAGES = BasicErrorHandler.messages


def _message(err) -> str:
    from cerberus import errors as ce

    if err.code == ce.UNALLOWED_VALUE.code:
        return f"`{err.field}` cannot be `{err.value}`; use one of " + ", ".join(map(str, err.constraint))
    if err.code == ce.MIN_VALUE.code:
        return f"`{err.field}` is {err.value}, below the minimum {err.constraint}"
    if err.code == ce.MAX_VALUE.code:
        return f"`{err.field}` is {err.value}, above the maximum {err.constraint}"
    template = _MESSAGES.get(err.code, "invalid value")
    try:
        text = template.format(constraint=err.constraint, value=err.value, field=err.field)
    except (KeyError, IndexError):
        text = template
    return f"`{err.field}`: {text}" if err.field is not None else text


# A Validator keeps the document it validated and its errors on itself, so two threads
# compiling at once (a hot reload beside a request that compiles) must not share one.
_PER_THREAD = threading.local()


def _validator(plugin: str | None) -> Validator:
    """One validator per schema and thread: building one costs more than a validation."""
    made = getattr(_PER_THREAD, "validators", None)
    if made is None:
        made = _PER_THREAD.validators = {}
    found = made.get(plugin)
    if found is None:
        found = made[plugin] = Validator(top_schema() if plugin is None else plugin_schema(plugin),
                                         purge_unknown=False)
    return found


def _validate(document: dict, plugin: str | None, prefix: IRPath, lowered: Lowered,
              diagnostics: list[Diagnostic]) -> dict | None:
    validator = _validator(plugin)
    if validator.validate(document):
        return validator.document
    for err in _flatten(validator._errors):
        path = (*prefix, *err.document_path)
        span = _nearest_span(path, lowered)
        diagnostics.append(make(codes.OUT_OF_RANGE, _message(err), span))
    return None


def _nearest_span(path: IRPath, lowered: Lowered):
    while path:
        if path in lowered.spans:
            return lowered.spans[path]
        path = path[:-1]
    return lowered.spans.get(("name",))


def validate(lowered: Lowered) -> tuple[dict | None, list[Diagnostic]]:
    """Validate and normalize the IR piece by piece (plugins each against their own schema)."""
    assert lowered.ir is not None
    diagnostics: list[Diagnostic] = []
    document = _validate(lowered.ir, None, (), lowered, diagnostics)
    tiers = []
    for t, tier in enumerate(lowered.ir["tiers"]):
        plugins = [
            _validate(plugin, plugin["name"], ("tiers", t, "plugins", p), lowered, diagnostics)
            for p, plugin in enumerate(tier["plugins"])
        ]
        tiers.append(plugins)
    if document is None or diagnostics:
        return None, diagnostics
    for tier, plugins in zip(document["tiers"], tiers):
        tier["plugins"] = plugins
    return document, diagnostics
