"""Reading Volcano YAML nodes into typed values, with findings located at the node.

`NodeReader` is the base of the config and Queue readers: it collects diagnostics and converts
scalars the way Volcano reads them (a number may be written `2` or `"2"`, a boolean `true` or
`"true"`), checked against the catalog argument's kind and rules.
"""

from __future__ import annotations

import math
import re
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from compiler import catalog as cat
from compiler.quantities import to_base_units
from compiler.volcano import codes
from compiler.volcano.located_yaml import (
    BOOL_TAG,
    FLOAT_TAG,
    INT_TAG,
    STR_TAG,
    Entry,
    YamlText,
    duplicate_keys,
    entries,
    is_null,
    is_scalar,
    kind_of,
    plain,
)
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity, Span, make

_INTEGER_TEXT = re.compile(r"[-+]?[0-9]+\Z")
_NUMBER_TEXT = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")


class Invalid(Exception):
    """A value that cannot be converted; the caller reports it where the value is."""


class NodeReader:
    """Reads nodes into the model, collecting diagnostics."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def report(self, info: CodeInfo, message: str, span: Span | None, hint: str | None = None,
               severity: Severity | None = None) -> None:
        self.diagnostics.append(make(info, message, span, hint, severity))

    def mapping_entries(self, src: YamlText, node: MappingNode) -> list[Entry]:
        for entry in duplicate_keys(node):
            self.report(codes.BAD_YAML, f"`{entry.key}` appears twice here; YAML keeps only the last",
                        src.span(entry.key_node), severity=Severity.WARNING)
        seen: dict[str, Entry] = {}
        for entry in entries(node):
            seen[entry.key] = entry
        return list(seen.values())

    # --- values ---------------------------------------------------------------------------
    def number(self, node: Node, integer: bool = False) -> int | float:
        if not is_scalar(node) or node.tag == BOOL_TAG or node.tag not in (INT_TAG, FLOAT_TAG, STR_TAG):
            raise Invalid(f"expected {'an integer' if integer else 'a number'}, got {kind_of(node)}")
        text = node.value.strip()
        if node.tag == FLOAT_TAG or (node.tag == STR_TAG and not _INTEGER_TEXT.match(text)):
            if node.tag == STR_TAG and not _NUMBER_TEXT.match(text):
                raise Invalid(f"expected {'an integer' if integer else 'a number'}, got `{text}`")
            value = float(plain(node)) if node.tag == FLOAT_TAG else float(text)
            if not math.isfinite(value):
                raise Invalid(f"`{text}` is not a finite number")
            if integer:
                if value != int(value):
                    raise Invalid(f"expected an integer, got `{text}`")
                return int(value)
            return value
        return int(plain(node)) if node.tag == INT_TAG else int(text)

    @staticmethod
    def boolean(node: Node) -> bool:
        if is_scalar(node) and node.tag == BOOL_TAG:
            return bool(plain(node))
        if is_scalar(node) and node.tag == STR_TAG and node.value.strip().lower() in ("true", "false"):
            return node.value.strip().lower() == "true"
        raise Invalid(f"expected true or false, got {kind_of(node)}")

    @staticmethod
    def text(node: Node) -> str:
        if not is_scalar(node) or is_null(node):
            raise Invalid(f"expected a string, got {kind_of(node)}")
        return str(node.value)

    def string_maps(self, node: Node) -> list[dict[str, str]]:
        """A YAML list of maps of strings (deviceshare.GPUExclusiveRules). Volcano skips values that
        are no string, which would widen a rule: refused here instead."""
        if not isinstance(node, SequenceNode):
            raise Invalid(f"expected a list of label maps, got {kind_of(node)}")
        out = []
        for item in node.value:
            if not isinstance(item, MappingNode):
                raise Invalid(f"expected a map of labels in the list, got {kind_of(item)}")
            rule = {}
            for key, value in item.value:
                if not is_scalar(value) or is_null(value) or value.tag != STR_TAG:
                    raise Invalid(f"label `{plain(key)}`: expected a string value, got {kind_of(value)}")
                rule[str(plain(key))] = str(value.value)
            out.append(rule)
        return out

    def argument_value(self, arg: cat.Argument, node: Node) -> Any:
        """A Volcano argument value converted by its catalog kind, range-checked."""
        if arg.kind in (cat.NUMBER, cat.INT):
            value = self.number(node, integer=arg.kind == cat.INT)
        elif arg.kind == cat.PERCENT:
            raw = node.value.strip() if is_scalar(node) else ""
            if raw.endswith("%"):
                node = ScalarNode(STR_TAG, raw[:-1], node.start_mark, node.end_mark)
            value = self.number(node)
        elif arg.kind == cat.BOOL:
            value = self.boolean(node)
        elif arg.kind in (cat.SYMBOL, cat.STRING):
            value = self.text(node).strip()
        elif arg.kind == cat.QUANTITY:
            text = self.text(node)
            try:
                to_base_units(arg.resource or "", text)
            except ValueError as err:
                raise Invalid(str(err)) from None
            value = text.strip()
        elif arg.kind == cat.STRING_MAPS:
            value = self.string_maps(node)
        else:
            raise Invalid(f"a {arg.kind} argument has no Volcano form")
        rules = arg.rules
        if "allowed" in rules and value not in rules["allowed"]:
            raise Invalid(f"`{value}` is not one of " + ", ".join(rules["allowed"]))
        if "min" in rules and value < rules["min"]:
            raise Invalid(f"{value} is below the minimum {rules['min']}")
        if "max" in rules and value > rules["max"]:
            raise Invalid(f"{value} is above the maximum {rules['max']}")
        return value


def part_span(src: YamlText, node: Node, start: int, end: int) -> Span:
    """The span of characters [start, end) of a one-line scalar's value, else the whole value."""
    if not (is_scalar(node) and node.start_mark.line == node.end_mark.line and node.style in (None, "'", '"')):
        return src.span(node)
    column = node.start_mark.column + (0 if node.style is None else 1) + start
    line = node.start_mark.line + 1 + src.line_offset
    column += 1 + src.column_offset
    return Span(src.path, line, column, line, column + (end - start))
