"""The compiler's front door: policy file -> diagnostics and, when clean of errors, a Plan.

Like Jinja's Environment: load (policydsl) -> lower -> lint -> validate -> build, in one call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from compiler import lint
from compiler.lower import Lowered, lower
from compiler.plan import Plan, build_plan
from compiler.schema import validate
from policydsl.diagnostics import Diagnostic, Severity, SourceCache, render
from policydsl.loader import LoadedPolicy, load, load_text


@dataclass
class Compilation:
    plan: Plan | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: SourceCache = field(default_factory=SourceCache)
    loaded: LoadedPolicy | None = None
    lowered: Lowered | None = None

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity >= Severity.ERROR]

    @property
    def ok(self) -> bool:
        return self.plan is not None and not self.errors

    @property
    def unreadable(self) -> bool:
        """Nothing was compiled: the policy file could not be read (only PD001 errors)."""
        loaded = self.loaded
        return loaded is not None and loaded.main is None and all(d.code == "PD001" for d in self.errors)

    def error_text(self, path: str | Path) -> str:
        """Every error rendered with its source line (or, with none to show, that `path` does
        not compile): what a command prints for a policy it cannot use."""
        shown = [render(d, self.sources) for d in self.errors]
        return "\n".join(shown) or f"{path}: the policy does not compile"


def compile_loaded(loaded: LoadedPolicy, *, run_lint: bool = True, config: "lint.LintConfig | None" = None) -> Compilation:
    result = Compilation(plan=None, diagnostics=list(loaded.diagnostics), sources=loaded.sources, loaded=loaded)
    if loaded.main is None or not loaded.ok:
        return result
    lowered = lower(loaded)
    result.lowered = lowered
    result.diagnostics.extend(lowered.diagnostics)
    # Validate even when lowering found errors: the IR simply lacks the values that failed,
    # and one run then reports range errors too.
    document, schema_diags = validate(lowered)
    result.diagnostics.extend(schema_diags)
    if any(d.severity >= Severity.ERROR for d in lowered.diagnostics):
        document = None
    if run_lint:
        result.diagnostics.extend(lint.check(loaded, lowered, document, config))
    result.diagnostics = lint.apply_suppressions(loaded, result.diagnostics, config)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    if document is not None and not result.errors:
        result.plan = build_plan(document)
    return result


def compile_file(path: str | Path, **options) -> Compilation:
    return compile_loaded(load(path), **options)


def compile_text(text: str, path: str = "<string>", **options) -> Compilation:
    return compile_loaded(load_text(text, path), **options)
