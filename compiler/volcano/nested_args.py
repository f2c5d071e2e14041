"""Volcano plugin arguments that are nested mappings, read into and written from policy settings.

resource-strategy-fit takes `resources: {<resource>: {type: MostAllocated|LeastAllocated, weight: N}}`,
`sra: {enable, resources: "a,b", weight, resourceWeight: {a: N}}` and `proportional: {enable, ...}`;
the policy has `most_allocated` / `least_allocated` (resource -> weight), `sra_resources`,
`sra_weight` and `proportional`. Values are read as Volcano reads them: a type that is neither
MostAllocated nor LeastAllocated means LeastAllocated, a weight of 0 or less means 1, an sra
resource's negative weight means 1; a key with a `*` anywhere but at its end (or `*` alone) is an
error here (Volcano drops it with a log line)."""

from __future__ import annotations

from typing import Any, Callable

from yaml.nodes import Node

from compiler.volcano import codes
from compiler.volcano.located_yaml import YamlText, is_mapping, is_null, kind_of
from compiler.volcano.reading import Invalid

RSF = "resource-strategy-fit"
NESTED_KEYS = {RSF: ("resources", "sra", "proportional")}


def _valid_pattern(key: str) -> bool:
    return "*" not in key or (key != "*" and key.endswith("*") and key.count("*") == 1)


def read_nested(reader: Any, src: YamlText, plugin: str, key: str, node: Node, out: dict[str, Any],
                dropped: list[str] | None) -> None:
    """Read nested argument `key` of `plugin` into `out` (policy argument names), reporting located."""
    if is_null(node):
        return
    if not is_mapping(node):
        raise Invalid(f"expected a mapping, got {kind_of(node)}")
    entries = {e.key: e for e in reader.mapping_entries(src, node)}
    if key == "resources":
        for resource, entry in entries.items():
            if not _valid_pattern(resource):
                reader.report(codes.BAD_VALUE, f"`resources.{resource}`: a wildcard is one `*` at the end of a "
                              "prefix (nvidia.com/*)", src.span(entry.key_node))
                continue
            if not is_mapping(entry.value):
                reader.report(codes.BAD_VALUE, f"`resources.{resource}`: expected a mapping with `type` and "
                              f"`weight`, got {kind_of(entry.value)}", src.span(entry.value))
                continue
            fields = {e.key: e for e in reader.mapping_entries(src, entry.value)}
            for extra in set(fields) - {"type", "weight"}:
                reader.report(codes.UNKNOWN_ARGUMENT, f"`resources.{resource}` has no field `{extra}`; not imported",
                              src.span(fields[extra].key_node), "its fields: type, weight")
            kind = reader.text(fields["type"].value) if "type" in fields else ""
            weight = reader.number(fields["weight"].value, integer=True) if "weight" in fields else 0
            target = "most_allocated" if kind == "MostAllocated" else "least_allocated"
            out.setdefault(target, {})[resource] = weight if weight > 0 else 1
        return
    enable = reader.boolean(entries["enable"].value) if "enable" in entries else False
    if key == "sra":
        for extra in set(entries) - {"enable", "resources", "weight", "resourceWeight"}:
            reader.report(codes.UNKNOWN_ARGUMENT, f"`sra` has no field `{extra}`; not imported",
                          src.span(entries[extra].key_node), "its fields: enable, resources, weight, resourceWeight")
        if not enable:
            return
        names = [r.strip() for r in reader.text(entries["resources"].value).split(",")] if "resources" in entries else []
        given: dict[str, int] = {}
        if "resourceWeight" in entries and not is_null(entries["resourceWeight"].value):
            for e in reader.mapping_entries(src, entries["resourceWeight"].value):
                given[e.key] = reader.number(e.value, integer=True)
        weights = {r: (given.get(r, 1) if given.get(r, 1) >= 0 else 1) for r in names if r}
        weight = reader.number(entries["weight"].value, integer=True) if "weight" in entries else 0
        out["sra_resources"] = weights
        out["sra_weight"] = max(weight, 0)
        return
    # proportional: its predicate is not evaluated; on, it changes decisions.
    if enable:
        why = "the proportional predicate (idle CPU and memory kept per idle GPU) is not evaluated yet"
        reader.report(codes.DROPPED, f"plugin `{plugin}`: `proportional.enable: true` changes decisions and is not "
                      f"imported ({why})", src.span(entries["enable"].key_node),
                      "pass --allow-dropped to write the policy without it, noted as a comment")
        if dropped is not None:
            dropped.append(f"proportional.enable: true ({why})")


def _number(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def export_rsf(arguments: dict[str, Any]) -> dict[str, Any]:
    """The policy's resource-strategy-fit settings as Volcano's nested arguments."""
    out: dict[str, Any] = {}
    resources = {r: {"type": "LeastAllocated", "weight": _number(w)}
                 for r, w in (arguments.get("least_allocated") or {}).items()}
    resources.update({r: {"type": "MostAllocated", "weight": _number(w)}
                      for r, w in (arguments.get("most_allocated") or {}).items()})
    if resources:
        out["resources"] = resources
    if arguments.get("sra_weight"):
        sra = arguments.get("sra_resources") or {}
        out["sra"] = {"enable": True, "resources": ",".join(sra), "weight": _number(arguments["sra_weight"]),
                      "resourceWeight": {r: _number(w) for r, w in sra.items()}}
    return out


EXPORTERS: dict[str, tuple[frozenset[str], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    RSF: (frozenset({"most_allocated", "least_allocated", "sra_resources", "sra_weight", "proportional"}), export_rsf),
}
