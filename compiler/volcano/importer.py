"""`import-volcano`: a Volcano scheduler config (and Queue objects) as an equivalent policy.

The readers (config_reader, queue_reader) turn located YAML into the model; this module lays
the model out as policy declarations (policy_text) with comments, and is the front door that
reads the files. Whatever the policy cannot say is a diagnostic, and the output notes it in a
comment where it stood.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler import catalog as cat
from compiler.pipeline import compile_text
from compiler.volcano import codes
from compiler.volcano import policy_text as pt
from compiler.volcano.config_reader import CONFIG_KEY, ConfigReader
from compiler.volcano.located_yaml import YamlText
from compiler.volcano.model import PluginConfig, QueueConfig, SchedulerConfig, TranslationResult
from compiler.volcano.queue_reader import QueueReader
from policydsl.diagnostics import Diagnostic, Severity, Span, make
from policydsl.limits import MAX_POLICY_BYTES, describe_bytes
from policydsl.loader import read_limited


@dataclass
class ImportResult(TranslationResult):
    """A policy printed from a Volcano config, with what was read."""

    config: SchedulerConfig | None = None
    queues: tuple[QueueConfig, ...] = ()


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


def _setting_value(arg: cat.Argument, value: Any) -> Any:
    if arg.kind == cat.SYMBOL:
        return pt.symbol(value)
    if arg.kind == cat.QUANTITY:
        return pt.quantity(value)
    return value


def _plugin_decl(plugin: PluginConfig) -> pt.PluginDecl:
    spec = cat.PLUGINS[plugin.name]
    settings = [pt.Setting(cat.FLAG_PREFIX + name, value) for name, value in plugin.flags.items()]
    for name, value in plugin.arguments.items():
        arg = spec.argument(name)
        assert arg is not None
        settings.append(pt.Setting(name, _setting_value(arg, value)))
    comments = [f"{plugin.name}: {_first_sentence(spec.doc)}"]
    comments += list(plugin.notes)
    comments += [f"not imported: {item}" for item in plugin.dropped]
    return pt.PluginDecl(plugin.name, plugin.weight, settings, comments)


def _queue_decl(queue: QueueConfig, children: dict[str | None, list[QueueConfig]]) -> pt.QueueDecl:
    settings = []
    for arg in cat.QUEUE_SETTINGS:
        value = getattr(queue, arg.name, None)
        if value is None:
            continue
        if arg.kind == cat.RESOURCES:
            value = {resource: pt.quantity(text) for resource, text in value.items()}
        elif arg.kind == cat.SYMBOL:
            value = pt.symbol(value)
        settings.append(pt.Setting(arg.name, value))
    return pt.QueueDecl(queue.name, settings, [_queue_decl(child, children) for child in children.get(queue.name, [])],
                        [queue.note] if queue.note else [])


def policy_doc(config: SchedulerConfig, queues: list[QueueConfig], name: str,
               config_path: str, queues_path: str | None) -> pt.PolicyDoc:
    comments = [f"Imported from {Path(config_path).name} by `policydsl import-volcano`."]
    if config.origin:
        comments.append(f"(read from {config.origin})")
    comments.append("Tiers and plugin order are Volcano's; `enable_*` settings are its enable* flags.")
    doc = pt.PolicyDoc(name, comments=comments)
    doc.actions = list(config.actions)
    if config.written_actions:
        doc.actions_comments.append("Volcano's order was " + ", ".join(map(cat.volcano_action, config.written_actions))
                                    + "; a policy runs "
                                    "actions in the canonical order.")
    if config.left_out_actions:
        doc.actions_comments.append("not imported: action " + ", ".join(f"`{a}`" for a in config.left_out_actions))
    for tier in config.tiers:
        doc.tiers.append(pt.TierDecl([_plugin_decl(p) for p in tier.plugins],
                                     trailing_comments=[f"not imported: plugin `{n}`" for n in tier.left_out]))
    for action, arguments in config.configurations.items():
        spec = cat.ACTIONS[action]
        settings = []
        for arg_name, value in arguments.items():
            arg = next(a for a in spec.arguments if a.name == arg_name)
            settings.append(pt.Setting(arg_name, _setting_value(arg, value)))
        if settings:
            doc.action_configs.append(pt.ActionDecl(action, settings))
    children: dict[str | None, list[QueueConfig]] = {}
    for queue in queues:
        children.setdefault(queue.parent, []).append(queue)
    root = next((q for q in queues if q.name == cat.ROOT_QUEUE), None)
    if root is not None:
        # Top-level queues live under `root`; declared with settings, it holds them all.
        top = [q for q in children.get(None, []) if q is not root]
        children[cat.ROOT_QUEUE] = top + children.get(cat.ROOT_QUEUE, [])
        children[None] = [root]
    doc.queues = [_queue_decl(q, children) for q in children.get(None, [])]
    if queues_path:
        doc.queues_comments.append(f"Queues from {Path(queues_path).name}; nesting follows `spec.parent` "
                                    "or the `volcano.sh/hierarchy` annotations, weighted by `volcano.sh/hierarchy-weights`.")
    return doc


def _policy_name(config_path: str) -> str:
    """The file's name without its suffix: more telling than a ConfigMap's, which Volcano's chart
    always calls volcano-scheduler-configmap."""
    name = Path(config_path).name
    for suffix in (".yaml", ".yml", ".conf"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "imported"


def import_volcano_text(config_text: str, config_path: str = CONFIG_KEY, queues_text: str | None = None,
                        queues_path: str = "queues.yaml", *, name: str | None = None,
                        allow_dropped: bool = False) -> ImportResult:
    """The policy for a Volcano config (and Queue objects) given as text. An argument that changes
    decisions and is not imported (PD614) fails the import (no policy), unless `allow_dropped`:
    then it is a warning and a `# not imported:` comment in the policy."""
    result = ImportResult(text=None)
    result.sources.add(config_path, config_text)
    reader = ConfigReader()
    config = reader.read(YamlText(config_path, config_text))
    result.diagnostics.extend(_dropped_allowed(d) if allow_dropped else d for d in reader.diagnostics)
    queues: list[QueueConfig] = []
    if queues_text is not None:
        result.sources.add(queues_path, queues_text)
        queue_reader = QueueReader()
        queues = queue_reader.read(YamlText(queues_path, queues_text))
        result.diagnostics.extend(queue_reader.diagnostics)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    if config is None:
        return result
    result.config = config
    result.queues = tuple(queues)
    doc = policy_doc(config, queues, name or _policy_name(config_path), config_path,
                     queues_path if queues_text is not None else None)
    result.text = pt.render(doc)
    result.diagnostics.extend(_policy_checks(result.text, config))
    if any(d.code == codes.DROPPED.code and d.severity >= Severity.ERROR for d in result.diagnostics):
        result.text = None
    return result


def _dropped_allowed(diag: Diagnostic) -> Diagnostic:
    if diag.code != codes.DROPPED.code:
        return diag
    return make(codes.DROPPED, diag.message, diag.span, "written as a `# not imported:` comment (--allow-dropped)",
                Severity.WARNING)


def _policy_checks(text: str, config: SchedulerConfig) -> list[Diagnostic]:
    """Errors and warnings the imported policy itself would get from `policydsl lint`, reported
    on the config they come from: the policy text is not a file yet, so there is nothing else to
    point at. An error refuses the import; a warning (a config Volcano runs and so does the
    scheduler, but likely a mistake) lets it through."""
    compiled = compile_text(text, "<imported policy>")
    out = [make(codes.POLICY_REJECTED, f"the imported policy fails check {d.code} ({d.name}): {d.message}",
                config.span, d.hint) for d in compiled.errors]
    out += [make(codes.POLICY_WARNED, f"the imported policy gets warning {d.code} ({d.name}): {d.message}",
                 config.span, d.hint) for d in compiled.diagnostics
            if d.severity == Severity.WARNING and d.code in VOLCANO_RUNS]
    return out


# Checks that warn of a config Volcano runs and the scheduler runs too (no `allocate`; proportion
# with capacity): said on the import, the rest of lint's warnings are left to `policydsl lint`.
VOLCANO_RUNS = frozenset({"PD301", "PD401"})


def _read(path: str, result: ImportResult) -> str | None:
    try:
        with open(path, "rb") as stream:  # a config becomes one policy: held to a policy file's size
            data = read_limited(stream)
        if len(data) > MAX_POLICY_BYTES:
            raise ValueError(f"it is larger than {describe_bytes(MAX_POLICY_BYTES)}")
        return data.decode("utf-8")
    except (OSError, ValueError) as err:  # UnicodeDecodeError is a ValueError
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        if isinstance(err, IsADirectoryError):
            reason = "it is a folder"
        result.diagnostics.append(make(codes.UNREADABLE, f"cannot read {path}: {reason}", Span.point(path, 1, 1)))
        result.unreadable = True
        return None


def import_volcano(config_path: str, queues_path: str | None = None, *, name: str | None = None,
                   allow_dropped: bool = False) -> ImportResult:
    """The policy for a Volcano config file (raw or a ConfigMap) and, optionally, a Queue file."""
    failed = ImportResult(text=None)
    config_text = _read(config_path, failed)
    queues_text = _read(queues_path, failed) if queues_path else None
    if failed.unreadable:
        return failed
    assert config_text is not None
    return import_volcano_text(config_text, config_path, queues_text, queues_path or "queues.yaml", name=name,
                               allow_dropped=allow_dropped)
