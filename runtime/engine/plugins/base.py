"""What every plugin is: `Plugin` (built from its PluginPlan, registering callbacks at the
session's extension points in `on_session_open`) and `CatalogMismatch`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from compiler.plan import PluginPlan

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from runtime.engine.session import Session


class CatalogMismatch(RuntimeError):
    """The catalog (compiler.catalog) and the runtime's plugins disagree: a plugin one has and
    the other has not, or an extension point one says a plugin answers and the other does not.
    The scheduler refuses to start on it rather than run a policy it would half ignore."""


class Plugin:
    name = ""
    # The extension points this implementation registers answers at (the catalog's points that
    # are extension points, runtime.engine.extension.POINTS; the rest of them are Volcano switches).
    answers: frozenset[str] = frozenset()

    def __init__(self, spec: PluginPlan):
        self.spec = spec
        self.args = dict(spec.arguments)

    def register(self, ssn: "Session", point: str, fn: Callable,
                 column: Callable[[], "np.ndarray"] | None = None) -> None:
        """`column`: the answers for every row at once: at an order point, the keys (Session.job_order);
        at job_valid, where the job may be invalid (Session.jobs_to_validate asks only those)."""
        if point not in self.answers:
            raise CatalogMismatch(f"plugin {self.name} registers `{point}`, which it does not declare")
        if self.spec.enabled(point):
            ssn.register(point, self.name, fn, column)

    def on_session_open(self, ssn: "Session") -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def on_session_close(self, ssn: "Session") -> None:
        """As the session closes (Volcano's OnSessionClose): most plugins have nothing to do."""
