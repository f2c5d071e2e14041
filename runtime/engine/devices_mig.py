"""HAMi vGPU's MIG mode as Volcano chooses slices (pkg/scheduler/api/devices/nvidia/vgpu/mig.go and
config/vgpu.go): the pure part, not wired into placement yet. MIG nodes still wait and
`KnownGeometriesCMName`/`Namespace` stay refused (lint PD413, import PD614) until the inventory,
the rule and the connector's ConfigMap watch use this module.

The geometries come from the device config ConfigMap (Volcano's default
`kube-system/volcano-vgpu-device-config`, key `device-config.yaml`): `nvidia.knownMigGeometries`,
a list of `{models: [...], allowedGeometries: [{group, geometries: [{name, memory, count}]}]}`. A
card in `mig` mode takes the geometries of the first entry one of whose models its type contains
(none: Volcano falls back to hami-core for that card).

A card runs one geometry (group) at a time: the first placement picks the first group, in the
config's order, with an instance of at least the asked memory; later ones only that group, and
only instance kinds already in use there (Volcano's pickFromGroup reads the usage list, so a kind
the group has but nobody uses yet is not offered once the group is in use). Within a group the
smallest instance that holds the ask is taken (best fit), at the lowest free index. A device is
named `UUID[group-position]`, position counting the instances of the group's earlier kinds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

DEVICE_CONFIG_KEY = "device-config.yaml"
DEFAULT_CONFIGMAP = ("kube-system", "volcano-vgpu-device-config")


@dataclass(frozen=True)
class MigInstance:
    name: str          # e.g. 1g.10gb
    memory: int        # MiB
    count: int


@dataclass(frozen=True)
class Geometry:
    group: str
    instances: tuple[MigInstance, ...]


@dataclass(frozen=True)
class KnownGeometries:
    models: tuple[str, ...]
    geometries: tuple[Geometry, ...]


@dataclass
class KindInUse:
    name: str
    memory: int
    used: list[int] = field(default_factory=list)     # instance indexes taken, ascending


@dataclass
class MigUsage:
    """One card's MIG state: the group in use (-1: none yet) and the instance kinds taken."""

    group: int = -1
    kinds: list[KindInUse] = field(default_factory=list)


class MigConfigError(ValueError):
    pass


def parse_device_config(text: str) -> tuple[KnownGeometries, ...]:
    """`nvidia.knownMigGeometries` of a device-config.yaml; MigConfigError naming the bad path."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise MigConfigError(f"{DEVICE_CONFIG_KEY} is no YAML: {err}") from None
    nvidia = _mapping(doc, DEVICE_CONFIG_KEY).get("nvidia") or {}
    known = _mapping(nvidia, "nvidia").get("knownMigGeometries") or []
    if not isinstance(known, list):
        raise MigConfigError("nvidia.knownMigGeometries: expected a list")
    out = []
    for i, entry in enumerate(known):
        where = f"nvidia.knownMigGeometries[{i}]"
        entry = _mapping(entry, where)
        models = entry.get("models") or []
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise MigConfigError(f"{where}.models: expected a list of strings")
        groups = []
        for j, group in enumerate(entry.get("allowedGeometries") or []):
            gwhere = f"{where}.allowedGeometries[{j}]"
            group = _mapping(group, gwhere)
            instances = []
            for k, inst in enumerate(group.get("geometries") or []):
                iwhere = f"{gwhere}.geometries[{k}]"
                inst = _mapping(inst, iwhere)
                memory, count = inst.get("memory"), inst.get("count")
                if not isinstance(memory, int) or not isinstance(count, int) or memory < 0 or count < 0:
                    raise MigConfigError(f"{iwhere}: memory and count must be whole numbers >= 0")
                instances.append(MigInstance(str(inst.get("name", "")), memory, count))
            groups.append(Geometry(str(group.get("group", "")), tuple(instances)))
        out.append(KnownGeometries(tuple(models), tuple(groups)))
    return tuple(out)


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise MigConfigError(f"{where}: expected a map")
    return value


def geometries_for_type(known: tuple[KnownGeometries, ...], card_type: str) -> tuple[Geometry, ...] | None:
    """Volcano's extractGeometryFromType: the first entry one of whose models the card type
    contains (case as written), else None (the card is then hami-core)."""
    for entry in known:
        if any(model in card_type for model in entry.models):
            return entry.geometries
    return None


def encode_mig_id(uuid: str, group: str, position: int) -> str:
    return f"{uuid}[{group}-{position}]"


def decode_mig_id(device_id: str) -> tuple[str, int] | None:
    """(group, position) of `UUID[group-position]`, or None when it does not parse."""
    start, end = device_id.find("["), device_id.find("]")
    if start == -1 or end == -1 or start > end:
        return None
    parts = device_id[start + 1:end].split("-")
    if len(parts) != 2:
        return None
    try:
        return parts[0], int(parts[1])
    except ValueError:
        return None


def _position(group: Geometry, kind: int, used: list[int]) -> int:
    """The instances of the group's earlier kinds, plus the lowest free index of this kind."""
    before = sum(inst.count for inst in group.instances[:kind])
    free = next((i for i in range(group.instances[kind].count) if i not in used), None)
    return before + (free if free is not None else 0)


def _find_position(group: Geometry, position: int) -> tuple[int, int]:
    """(kind, index within the kind) of a position, or (-1, -1)."""
    total = 0
    for kind, inst in enumerate(group.instances):
        if position < total + inst.count:
            return kind, position - total
        total += inst.count
    return -1, -1


def pick_from_group(group: Geometry, kinds: list[KindInUse], memory: int) -> tuple[int, int] | None:
    """(position, instance memory) of the smallest instance of `group` holding `memory` MiB, given
    the kinds in use on the card (none: any kind of the group), else None."""
    for kind in sorted(range(len(group.instances)), key=lambda k: group.instances[k].memory):
        inst = group.instances[kind]
        if inst.memory < memory:
            continue
        if not kinds:
            if inst.count > 0:
                return _position(group, kind, []), inst.memory
            continue
        for in_use in kinds:
            if in_use.name == inst.name and inst.count - len(in_use.used) > 0:
                return _position(group, kind, in_use.used), inst.memory
    return None


def find_match(uuid: str, memory: int, usage: MigUsage,
               geometries: tuple[Geometry, ...]) -> tuple[str, int] | None:
    """Volcano's findMatch: (device id, instance memory) for an ask of `memory` MiB on a card, or None."""
    if usage.group >= 0:
        group = geometries[usage.group]
        picked = pick_from_group(group, usage.kinds, memory)
        return (encode_mig_id(uuid, group.group, picked[0]), picked[1]) if picked else None
    for group in geometries:
        picked = pick_from_group(group, [], memory)
        if picked:
            return encode_mig_id(uuid, group.group, picked[0]), picked[1]
    return None


def add_used(usage: MigUsage, geometries: tuple[Geometry, ...], group_name: str, position: int) -> int:
    """Record a device `group_name`/`position` as taken; its instance memory (0: no such group)."""
    for g, group in enumerate(geometries):
        if group.group != group_name:
            continue
        kind, index = _find_position(group, position)
        if kind < 0:
            return 0
        usage.group = g
        inst = group.instances[kind]
        for in_use in usage.kinds:
            if in_use.name == inst.name:
                if index not in in_use.used:
                    in_use.used = sorted([*in_use.used, index])
                return in_use.memory
        usage.kinds.append(KindInUse(inst.name, inst.memory, [index]))
        return inst.memory
    return 0


def sub_used(usage: MigUsage, geometries: tuple[Geometry, ...], group_name: str, position: int) -> int:
    """Give back a device recorded by add_used; its instance memory (0: it was not recorded)."""
    for group in geometries:
        if group.group != group_name:
            continue
        kind, index = _find_position(group, position)
        if kind < 0:
            return 0
        name = group.instances[kind].name
        for i, in_use in enumerate(usage.kinds):
            if in_use.name == name:
                in_use.used = [u for u in in_use.used if u != index]
                if not in_use.used:
                    del usage.kinds[i]
                return in_use.memory
        return 0
    return 0
