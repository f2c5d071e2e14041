"""AST to IR: resolve names against the catalog, evaluate constants, convert values.

The IR is plain data (dicts, lists, numbers, strings) that the Cerberus schema checks.
Next to it, `spans` maps each IR path (a tuple of keys and indexes) to the source span of
the value it came from, so a schema error points back at the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compiler import catalog as cat
from compiler import codes
from compiler.quantities import to_base_units
from policydsl import nodes as n
from policydsl.diagnostics import ComparisonBudget, Diagnostic, Span, Suggester, make
from policydsl.loader import LoadedPolicy

IRPath = tuple


class _ValueError(Exception):
    def __init__(self, info, message: str, span: Span, hint: str | None = None):
        super().__init__(message)
        self.diagnostic = make(info, message, span, hint)


_KIND_WORDS = {
    cat.INT: "an integer",
    cat.NUMBER: "a number",
    cat.BOOL: "true or false",
    cat.STRING: "a quoted string",
    cat.SYMBOL: "one of the allowed names",
    cat.QUANTITY: "a quantity such as 500m or 8Gi",
    cat.RESOURCES: "a resource map such as { cpu: 4, memory: 8Gi }",
    cat.RESOURCE_WEIGHTS: 'a map of resource weights such as { "nvidia.com/gpu": 5 }',
    cat.STRINGS: 'a list of strings such as ["a", "b"]',
    cat.PERCENT: "a percentage such as 50%",
    cat.STRING_MAP: 'a map of strings such as { rz1: "10:00-21:00" }',
    cat.STRING_MAPS: 'a list of maps of strings such as [{ app: "training" }]',
}


def _describe(value: n.Value) -> str:
    return {
        n.Integer: "an integer", n.Float: "a decimal number", n.Quantity: "a quantity",
        n.Percent: "a percentage", n.Boolean: "a boolean", n.String: "a string",
        n.ConstRef: "a name", n.ListValue: "a list", n.MapValue: "a map",
    }[type(value)]


@dataclass
class Lowered:
    ir: dict | None
    spans: dict[IRPath, Span] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    used_constants: set[str] = field(default_factory=set)
    constants: dict[str, n.Const] = field(default_factory=dict)


class _Lowering:
    def __init__(self, loaded: LoadedPolicy):
        self.loaded = loaded
        self.out = Lowered(ir=None)
        for const in (item for item in loaded.items() if isinstance(item, n.Const)):
            self.out.constants[const.name.value] = const
        # "Did you mean": bounded per lookup and, all lookups together, per compile (a policy
        # of thousands of undefined names compiles in time linear in its size); the constants
        # are indexed once.
        self._comparisons = ComparisonBudget()
        self._constant_names: Suggester | None = None

    def did_you_mean(self, word: str, candidates) -> str | None:
        if candidates is self.out.constants:
            if self._constant_names is None:
                self._constant_names = Suggester(self.out.constants, budget=self._comparisons)
            match = self._constant_names.closest(word)
        else:
            match = Suggester(candidates, budget=self._comparisons).closest(word)
        return f"did you mean `{match}`?" if match else None

    # --- values ---------------------------------------------------------------------------
    def deref(self, value: n.Value, kind: str, chain: tuple[str, ...] = ()) -> n.Value:
        """Follow constant references; a bare name that is no constant may be a symbol."""
        if not isinstance(value, n.ConstRef):
            return value
        const = self.out.constants.get(value.name)
        if const is None:
            if kind == cat.SYMBOL:
                return value
            raise _ValueError(codes.UNKNOWN_CONSTANT, f"`{value.name}` is not a defined constant", value.span,
                              self.did_you_mean(value.name, self.out.constants) or
                              "define it with `const`, or quote it to make a string")
        if value.name in chain:
            raise _ValueError(codes.UNKNOWN_CONSTANT, f"constant `{value.name}` refers to itself", value.span)
        self.out.used_constants.add(value.name)
        return self.deref(const.value, kind, (*chain, value.name))

    def convert(self, value: n.Value, kind: str, path: IRPath, resource: str | None = None) -> Any:
        self.out.spans[path] = value.span
        value = self.deref(value, kind)
        wrong = _ValueError(codes.WRONG_TYPE, f"expected {_KIND_WORDS[kind]}, got {_describe(value)}", value.span)
        if kind == cat.INT:
            if isinstance(value, n.Integer):
                return value.value
            raise wrong
        if kind == cat.NUMBER:
            if isinstance(value, (n.Integer, n.Float)):
                return value.value
            raise wrong
        if kind == cat.PERCENT:
            if isinstance(value, (n.Percent, n.Integer, n.Float)):
                return value.value
            raise wrong
        if kind == cat.BOOL:
            if isinstance(value, n.Boolean):
                return value.value
            raise wrong
        if kind == cat.STRING:
            if isinstance(value, n.String):
                return value.value
            raise wrong
        if kind == cat.SYMBOL:
            if isinstance(value, n.ConstRef):
                return value.name
            if isinstance(value, n.String):
                return value.value
            raise wrong
        if kind == cat.QUANTITY:
            return self.quantity(value, resource or "", wrong)
        if kind == cat.STRINGS:
            if not isinstance(value, n.ListValue):
                raise wrong
            return [self.convert(item, cat.STRING, (*path, i)) for i, item in enumerate(value.items)]
        if kind == cat.STRING_MAP:
            if not isinstance(value, n.MapValue):
                raise wrong
            return {e.key: self.convert(e.value, cat.STRING, (*path, e.key)) for e in value.entries}
        if kind == cat.STRING_MAPS:
            if not isinstance(value, n.ListValue):
                raise wrong
            return [self.convert(item, cat.STRING_MAP, (*path, i)) for i, item in enumerate(value.items)]
        if kind in (cat.RESOURCES, cat.RESOURCE_WEIGHTS):
            if not isinstance(value, n.MapValue):
                raise wrong
            result = {}
            for entry in value.entries:
                entry_path = (*path, entry.key)
                if kind == cat.RESOURCES:
                    result[entry.key] = self.convert(entry.value, cat.QUANTITY, entry_path, resource=entry.key)
                else:
                    result[entry.key] = self.convert(entry.value, cat.NUMBER, entry_path)
            return result
        raise AssertionError(f"unknown value kind {kind}")

    def quantity(self, value: n.Value, resource: str, wrong: _ValueError) -> int:
        if isinstance(value, (n.Integer, n.Quantity, n.String)):
            text = str(value.value) if isinstance(value, (n.Integer, n.String)) else value.text
        elif isinstance(value, n.Float):
            text = value.text
        else:
            raise wrong
        try:
            return to_base_units(resource, text)
        except ValueError as err:
            raise _ValueError(codes.BAD_QUANTITY, str(err), value.span) from None

    def try_convert(self, value: n.Value, kind: str, path: IRPath, resource: str | None = None) -> Any:
        try:
            return self.convert(value, kind, path, resource)
        except _ValueError as err:
            self.out.diagnostics.append(err.diagnostic)
            return None

    # --- structure ------------------------------------------------------------------------
    def lower(self) -> Lowered:
        items = list(self.loaded.items())
        main = self.loaded.main
        assert main is not None
        ir: dict[str, Any] = {
            "name": main.header.name.value,
            "version": main.header.version.value,
            "actions": [],
            "action_arguments": {},
            "tiers": [],
            "queues": [],
            "devices": [],
        }
        self.out.spans[("name",)] = main.header.name.span
        actions = [i for i in items if isinstance(i, n.Actions)]
        if not actions:
            self.out.diagnostics.append(make(codes.MISSING_ACTIONS, "the policy declares no actions",
                                             main.header.span, "add `actions [enqueue, allocate, backfill]`"))
        else:
            ir["actions"] = self.actions(actions[-1])
        for item in items:
            if isinstance(item, n.ActionConfig):
                self.action_config(item, ir)
            elif isinstance(item, n.Tier):
                ir["tiers"].append(self.tier(item, len(ir["tiers"])))
            elif isinstance(item, n.Queue):
                self.queues(item, None, ir["queues"])
            elif isinstance(item, n.Device):
                ir["devices"].append(self.device(item, len(ir["devices"])))
        self.out.ir = ir
        return self.out

    def actions(self, node: n.Actions) -> list[str]:
        names = []
        for i, name in enumerate(node.names):
            self.out.spans[("actions", i)] = name.span
            if name.value not in cat.ACTIONS:
                self.out.diagnostics.append(make(codes.UNKNOWN_ACTION, f"unknown action `{name.value}`", name.span,
                                                 self.did_you_mean(name.value, cat.ACTIONS)))
                continue
            names.append(name.value)
        return names

    def arguments(self, settings, specs: tuple[cat.Argument, ...], path: IRPath, owner: str,
                  flags: dict | None = None, points: frozenset[str] = frozenset(),
                  unknown_info=codes.UNKNOWN_ARGUMENT) -> dict:
        by_name = {a.name: a for a in specs}
        own_flags = [cat.FLAG_PREFIX + f.name for f in cat.FLAGS if f.name in points]
        result: dict[str, Any] = {}
        for setting in settings:
            key = setting.key.value
            if flags is not None and key in cat.FLAGS_BY_SETTING and key not in own_flags:
                self.out.diagnostics.append(make(
                    unknown_info, f"{owner} has no extension point `{key[len(cat.FLAG_PREFIX):]}` to switch",
                    setting.key.span, "its flags: " + (", ".join(own_flags) or "none")))
                continue
            if flags is not None and key in cat.FLAGS_BY_SETTING:
                flag = cat.FLAGS_BY_SETTING[key]
                self.out.spans[(*path[:-1], "flags", flag.name)] = setting.key.span
                converted = self.try_convert(setting.value, cat.BOOL, (*path[:-1], "flags", flag.name))
                if converted is not None:
                    flags[flag.name] = converted
                continue
            spec = by_name.get(key)
            if spec is None:
                candidates = list(by_name) + own_flags
                self.out.diagnostics.append(make(unknown_info, f"{owner} has no setting `{key}`", setting.key.span,
                                                 cat.RETIRED_SETTINGS.get(key)
                                                 or (cat.QUEUE_SPELLINGS.get(key) if specs is cat.QUEUE_SETTINGS else None)
                                                 or self.did_you_mean(key, candidates)
                                                 or _listing(list(by_name))))
                continue
            self.out.spans[(*path, key)] = setting.key.span
            converted = self.try_convert(setting.value, spec.kind, (*path, key), spec.resource)
            if converted is not None:
                result[key] = converted
        return result

    def action_config(self, node: n.ActionConfig, ir: dict) -> None:
        name = node.name.value
        spec = cat.ACTIONS.get(name)
        if spec is None:
            self.out.diagnostics.append(make(codes.UNKNOWN_ACTION, f"unknown action `{name}`", node.name.span,
                                             self.did_you_mean(name, cat.ACTIONS)))
            return
        args = self.arguments(node.settings, spec.arguments, ("action_arguments", name), f"action `{name}`")
        ir["action_arguments"].setdefault(name, {}).update(args)

    def tier(self, node: n.Tier, index: int) -> dict:
        plugins = []
        for plugin in node.plugins:
            lowered = self.plugin(plugin, ("tiers", index, "plugins", len(plugins)))
            if lowered is not None:
                plugins.append(lowered)
        return {"label": node.label.value if node.label else None, "plugins": plugins}

    def plugin(self, node: n.Plugin, path: IRPath) -> dict | None:
        name = node.name.value
        spec = cat.PLUGINS.get(name)
        self.out.spans[path] = node.name.span
        if spec is None:
            self.out.diagnostics.append(make(codes.UNKNOWN_PLUGIN, f"unknown plugin `{name}`", node.name.span,
                                             self.did_you_mean(name, cat.PLUGINS)))
            return None
        weight = None
        if node.weight is not None:
            if not spec.scores:
                self.out.diagnostics.append(make(codes.WEIGHT_NOT_SCORING,
                                                 f"plugin `{name}` does not score nodes; it takes no weight",
                                                 node.weight.span))
            else:
                weight = self.try_convert(node.weight, cat.NUMBER, (*path, "weight"))
        flags: dict[str, bool] = {}
        arguments = self.arguments(node.settings, spec.arguments, (*path, "arguments"), f"plugin `{name}`",
                                   flags=flags, points=spec.points)
        lowered: dict = {"name": name, "flags": flags, "arguments": arguments}
        if weight is not None:
            # Left out when not written, so the schema fills the catalog's default weight.
            lowered["weight"] = weight
        return lowered

    def queues(self, node: n.Queue, parent: str | None, out: list) -> None:
        index = len(out)
        path = ("queues", index)
        self.out.spans[path] = node.name.span
        self.out.spans[(*path, "name")] = node.name.span
        settings = self.arguments(node.settings, cat.QUEUE_SETTINGS, path, f"queue `{node.name.value}`",
                                  unknown_info=codes.UNKNOWN_SETTING)
        is_root = parent is None and node.name.value == cat.ROOT_QUEUE
        out.append({"name": node.name.value, "parent": None if is_root else (parent or cat.ROOT_QUEUE), **settings})
        for child in node.children:
            self.queues(child, node.name.value, out)

    def device(self, node: n.Device, index: int) -> dict:
        path = ("devices", index)
        self.out.spans[path] = node.resource.span
        self.out.spans[(*path, "resource")] = node.resource.span
        settings = self.arguments(node.settings, cat.DEVICE_SETTINGS, path, f"device `{node.resource.value}`",
                                  unknown_info=codes.UNKNOWN_SETTING)
        return {"resource": node.resource.value, **settings}


def _listing(names: list[str]) -> str | None:
    if not names:
        return "it takes no arguments (only `enable_*` flags)"
    return "it takes: " + ", ".join(names)


def lower(loaded: LoadedPolicy) -> Lowered:
    return _Lowering(loaded).lower()
