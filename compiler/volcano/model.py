"""A Volcano scheduler config and Queue objects, read into catalog terms.

This is also the normal form two Volcano configs are compared in: they mean the same when
they read to equal `SchedulerConfig`s. Reading normalizes exactly this:

- `actions` are names with surrounding blanks dropped (`"enqueue,allocate"` = `"enqueue, allocate"`);
- flags are keyed by catalog name (`enablePreemptable` -> `preemptable`), values true/false;
- arguments are keyed by catalog name and converted by the argument's kind: numbers compare
  as numbers (`"2"` = `2` = `2.0`), booleans also from `"true"`/`"false"`, symbols as text;
- a plugin's score weight (`binpack.weight`) is `PluginConfig.weight`, not an argument;
- `binpack.resources: "a, b"` with `binpack.resources.a: 5` is the map `{"a": 5, "b": 1}`
  (a listed resource without a weight weighs 1, as in Volcano), in listed order;
- `configurations` become {action: {argument: value}}, several entries for one action merged.

Queues keep quantities as written (`8Gi` stays `8Gi`); compare them in base units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policydsl.diagnostics import Diagnostic, Severity, SourceCache, Span


@dataclass
class TranslationResult:
    """What import or export produced: the text (None when nothing could be made), and why not."""

    text: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: SourceCache = field(default_factory=SourceCache)
    unreadable: bool = False

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity >= Severity.ERROR]

    @property
    def exit_code(self) -> int:
        """0 clean (warnings allowed), 1 when something could not be carried over, 2 unreadable input."""
        if self.unreadable:
            return 2
        return 1 if self.errors or self.text is None else 0


@dataclass(frozen=True)
class PluginConfig:
    name: str
    weight: int | float | None = None
    flags: dict[str, bool] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)
    # Arguments that change decisions and were not imported, as `# not imported:` comments.
    dropped: tuple[str, ...] = field(default=(), compare=False)
    # How an argument came to be here, e.g. an old Volcano flag taken by today's plugin.
    notes: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class TierConfig:
    plugins: tuple[PluginConfig, ...]
    # Plugins that could not be imported, for a comment where they stood.
    left_out: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class SchedulerConfig:
    actions: tuple[str, ...]
    tiers: tuple[TierConfig, ...]
    configurations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Where it came from, for the policy's header comment.
    origin: str = field(default="", compare=False)
    left_out_actions: tuple[str, ...] = field(default=(), compare=False)
    written_actions: tuple[str, ...] = field(default=(), compare=False)   # Volcano's order, if it differs
    span: Span | None = field(default=None, compare=False)   # where the config starts, for findings on all of it


# A Queue's spec.affinity (Volcano's nodegroup plugin), by part and term, and the policy's queue
# setting each becomes.
AFFINITY_SETTINGS = {
    ("nodeGroupAffinity", "requiredDuringSchedulingIgnoredDuringExecution"): "node_groups",
    ("nodeGroupAffinity", "preferredDuringSchedulingIgnoredDuringExecution"): "preferred_node_groups",
    ("nodeGroupAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"): "excluded_node_groups",
    ("nodeGroupAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution"): "avoided_node_groups",
}


@dataclass(frozen=True)
class QueueConfig:
    """One Queue object. Resource maps hold quantities as written."""

    name: str
    parent: str | None = None
    weight: int | None = None
    capability: dict[str, str] | None = None
    guarantee: dict[str, str] | None = None
    deserved: dict[str, str] | None = None
    priority: int | None = None
    reclaimable: bool | None = None
    state: str | None = None          # "open" or "closed"
    dequeue: str | None = None        # spec.dequeueStrategy
    node_groups: list[str] | None = None             # spec.affinity (the nodegroup plugin's), by part
    preferred_node_groups: list[str] | None = None
    excluded_node_groups: list[str] | None = None
    avoided_node_groups: list[str] | None = None
    note: str = field(default="", compare=False)   # a comment for the policy, e.g. a lost parent
