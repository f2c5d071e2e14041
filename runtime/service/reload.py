"""Hot reload: policy edits go live without a restart, and a bad edit never takes the scheduler down.

    first = attempt_compile(args.policy)                  # exit 2 on errors: nothing half-runs
    scheduler = Scheduler(first.plan, cluster, ...)
    reloader = PolicyReloader(args.policy, first, scheduler, metrics=metrics)
    reloader.start()                                      # watch the folders; reloader.request("SIGHUP") on SIGHUP
    ...; reloader.stop()

What is watched: the folder of the main file and of every file it includes (the compiler's
`LoadedPolicy.paths`, plus includes that failed to load), not the files: editors replace files
by renaming, and Kubernetes updates a mounted ConfigMap by swapping the `..data` symlink to a
new timestamped folder, which changes no watched file's inode but does create and rename
entries in the folder. Folders are watched without recursion; a folder a source resolves into
(through a symlink) is watched too unless it lies inside one already watched (the ConfigMap's
timestamped folders, which come and go with each swap).

What a burst of changes does: watchfiles yields once the set of changes stopped growing for
`debounce` (its `step`), so the kubelet's create-folder/rename/delete, or an editor's
write-temp/rename, is one wake-up. Only changes to a source's path or to the ConfigMap's
`..`-entries wake the reloader (a log file written next to the policy does not); then the
sources are fingerprinted (content hashes), and a wake-up that changed no source stops there.

What a reload does: parse, lint, compile and validate (compiler.pipeline.compile_file). A
policy without errors is handed to the scheduler (`set_plan`), which takes it at the start of
its next cycle, never during one, and starts that cycle at once. With errors, the last good
policy keeps running; the diagnostics are logged located (file:line:col), counted, and sent to
the `notifier` (in connected mode a Kubernetes Event, see LeaseEvents).

Reloads run one at a time on their own thread; file events and SIGHUP only wake it, so a
signal handler never compiles and a burst during a reload becomes one more reload.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from compiler.pipeline import Compilation, compile_file
from compiler.plan import Plan
from policydsl import nodes as n
from policydsl.diagnostics import Diagnostic, Severity
from policydsl.loader import read_limited, resolve_policy_path
from runtime.kube.metrics import Metrics
from runtime.kube.events import InvolvedObject

if TYPE_CHECKING:
    from runtime.kube.api import KubeApi
    from runtime.kube.events import EventRecorder

log = logging.getLogger("policydsl.reload")

DEFAULT_DEBOUNCE_S = 0.05
# A file rewritten without pause (a log-like writer) still reloads at least this often.
MAX_BURST_S = 1.6
# How often the watcher checks that the watched folders are still the same folders (a folder
# deleted and created again is a new inode the old watch never sees).
FOLDER_CHECK_S = 1.0
WATCH_ERROR_RETRY_S = 1.0
ERROR_LOG_EVERY_S = 30.0
# Compiles of one attempt at most: the first compile of a policy finds its includes, the second
# reads them hashed (a deeper include chain that keeps growing just compiles again next check).
COMPILE_ROUNDS = 3

Fingerprint = tuple[tuple[str, str | None], ...]


# --- one compilation of the policy --------------------------------------------------------------

@dataclass(frozen=True)
class PolicyVersion:
    """A policy that compiled without errors, and where it came from."""

    plan: Plan
    main: str
    files: tuple[str, ...]  # every source read, includes first, main last
    loaded_at: float  # Unix time


@dataclass(frozen=True)
class Attempt:
    """One compilation of the policy, the sources it read, and the fingerprint of the sources
    known before it, taken just before compiling (see fingerprint_of_known)."""

    compilation: Compilation
    main: str
    files: tuple[str, ...]
    fingerprint: Fingerprint

    @property
    def ok(self) -> bool:
        return self.compilation.ok

    @property
    def plan(self) -> Plan | None:
        return self.compilation.plan if self.ok else None

    @property
    def errors(self) -> list[Diagnostic]:
        return self.compilation.errors

    def version(self, loaded_at: float) -> PolicyVersion:
        assert self.compilation.plan is not None
        return PolicyVersion(self.compilation.plan, self.main, self.files, loaded_at)


def attempt_compile(policy: str | Path, known_files: Iterable[str] = ()) -> Attempt:
    """Compile the policy `--policy` names (a file, or a folder with main.policy). `known_files`:
    the sources of the previous attempt, fingerprinted before compiling, so that a write landing
    during the compile is always seen as a change by the next check."""
    main = absolute(resolve_policy_path(Path(policy)))
    known = {main, *known_files}
    for _ in range(COMPILE_ROUNDS):
        fingerprint = fingerprint_of(known)
        compilation = compile_file(main)
        files = source_files(compilation, main)
        if known.issuperset(files):
            break
        known.update(files)  # includes nobody hashed before the read: compile again, hashing them first
    return Attempt(compilation, main, files, fingerprint)


def absolute(path: str | Path) -> str:
    """Absolute, symlinks kept: a ConfigMap's file is `..data/x`, a path that stays valid across swaps."""
    return os.path.abspath(os.fspath(path))


def source_files(compilation: Compilation, main: str) -> tuple[str, ...]:
    """The main file, every file loaded, every include named within the policy's folder (loaded
    or not: creating a missing include is a change), and any file a diagnostic points into."""
    files: dict[str, None] = {}
    loaded = compilation.loaded
    if loaded is not None:
        for policy in loaded.files:
            for include in policy.of_type(n.Include):
                target = Path(policy.path).parent / include.path.value
                if loaded.confines(target):     # one outside the folder is refused, never read nor watched
                    files[absolute(target)] = None
            files[absolute(policy.path)] = None
    for diag in compilation.diagnostics:
        if diag.span is not None and not diag.span.path.startswith("<"):
            files[absolute(diag.span.path)] = None
    files.pop(main, None)
    return (*files, main)


def fingerprint_of(files: Iterable[str]) -> Fingerprint:
    """(path, content hash) per file in path order, None for one that cannot be read."""
    out = []
    for path in sorted(set(files)):
        try:
            # As much as the loader reads: past it the file is refused, and an endless one
            # (a device given as --policy) would keep this read going for ever.
            with open(path, "rb") as stream:
                digest: str | None = hashlib.sha256(read_limited(stream)).hexdigest()
        except OSError:
            digest = None
        out.append((path, digest))
    return tuple(out)


def watch_folders(files: Iterable[str]) -> tuple[str, ...]:
    """The folders whose entries decide what the files contain (see the module docstring)."""
    literal = {os.path.dirname(f) for f in files}
    resolved = {os.path.dirname(os.path.realpath(f)) for f in files}
    inside = {d for d in resolved if any(d == top or d.startswith(top.rstrip(os.sep) + os.sep) for top in literal)}
    return tuple(sorted(literal | (resolved - inside)))


def source_paths(files: Iterable[str]) -> frozenset[str]:
    """The paths whose changes matter: each source as named and as resolved."""
    return frozenset(p for f in files for p in (f, os.path.realpath(f)))


def touches_sources(path: str, sources: frozenset[str]) -> bool:
    """A change event about a source, or about the ConfigMap's `..data` machinery."""
    return path in sources or os.path.basename(path).startswith("..")


def folder_identity(folders: Iterable[str]) -> tuple[tuple[str, int | None], ...]:
    out = []
    for folder in folders:
        try:
            out.append((folder, os.stat(folder).st_ino))
        except OSError:
            out.append((folder, None))
    return tuple(out)


def located(diag: Diagnostic) -> str:
    """One log line: `file:line:col: error[PD101] message (hint: ...)`."""
    where = str(diag.span) if diag.span is not None else "<policy>"
    text = f"{where}: {diag.severity}[{diag.code}] {diag.message}"
    return f"{text} (hint: {diag.hint})" if diag.hint else text


# --- what a reload tells and whom -----------------------------------------------------------------

@dataclass(frozen=True)
class ReloadOutcome:
    trigger: str  # "file change", "SIGHUP", ...
    ok: bool
    revision: str  # the new revision (ok), else the one that keeps running
    changed: bool  # a new revision was handed to the scheduler
    errors: tuple[str, ...]  # located diagnostics
    seconds: float  # fingerprint + compile + hand-over
    woken_at: float | None  # monotonic time the trigger arrived (the watcher's yield, the signal)
    finished_at: float  # monotonic
    at: float  # Unix time


class PlanTarget(Protocol):
    """What runs the policy: runtime.service.loop.Scheduler."""

    @property
    def plan(self) -> Plan: ...

    def set_plan(self, plan: Plan) -> None: ...


class ReloadNotifier(Protocol):
    def succeeded(self, version: PolicyVersion, previous_revision: str) -> None: ...

    def failed(self, errors: list[str], keeping: PolicyVersion) -> None: ...


class LeaseEvents:
    """Reload outcomes as Kubernetes Events on the scheduler's Lease (`--lease-namespace`/
    `--lease-name`): one object every replica shares and RBAC already lets it read, found with
    `kubectl describe lease -n NS NAME` or `kubectl get events -n NS --field-selector
    involvedObject.kind=Lease`. PolicyReloadFailed (Warning) lists the located errors;
    PolicyReloaded (Normal) a new revision, or the recovery after a failure. Events go through
    the cluster's EventRecorder: only while this replica may write (leads), rate-limited."""

    def __init__(self, api: KubeApi, recorder: EventRecorder, namespace: str, name: str) -> None:
        self.api = api
        self.recorder = recorder
        self.namespace = namespace
        self.name = name
        self._uid = ""

    def succeeded(self, version: PolicyVersion, previous_revision: str) -> None:
        plan = version.plan
        message = (f"policy {plan.name} revision {plan.revision} loaded from {version.main}"
                   + (f" (was {previous_revision})" if previous_revision != plan.revision else ", the one running"))
        self._record("Normal", "PolicyReloaded", message)

    def failed(self, errors: list[str], keeping: PolicyVersion) -> None:
        message = (f"policy reload failed with {len(errors)} error(s), revision {keeping.plan.revision} keeps "
                   f"running: " + "; ".join(errors))
        self._record("Warning", "PolicyReloadFailed", message)

    def _record(self, type_: str, reason: str, message: str) -> None:
        ref = InvolvedObject("Lease", "coordination.k8s.io/v1", self.namespace, self.name, self._lease_uid())
        # Each reload is news: the recorder's "same message within 5 minutes" dedup must not hide
        # a failure that comes back after a success.
        self.recorder.forget(lambda key: key != ref.key)
        self.recorder.record(ref, type_, reason, message)

    def _lease_uid(self) -> str:
        """`kubectl describe lease` matches Events by uid too; without leader election the Lease
        may not exist, and the Event still lists under its name."""
        if not self._uid:
            try:
                lease = self.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}")
                self._uid = (lease or {}).get("metadata", {}).get("uid", "")
            except Exception as err:  # noqa: BLE001 - an Event without uid beats none
                log.debug("reading lease %s/%s for its uid: %s", self.namespace, self.name, err)
        return self._uid


# --- the reloader ------------------------------------------------------------------------------------

@dataclass
class _Request:
    trigger: str = ""
    force: bool = False
    woken_at: float | None = None
    pending: bool = False


class PolicyReloader:
    def __init__(self, policy: str | Path, first: Attempt, target: PlanTarget, *, metrics: Metrics,
                 debounce: float = DEFAULT_DEBOUNCE_S, notifier: ReloadNotifier | None = None,
                 on_reload: Callable[[ReloadOutcome], None] | None = None) -> None:
        if not first.ok:
            raise ValueError("the first policy must compile without errors")
        self.policy = policy
        self.target = target
        self.metrics = metrics
        self.debounce = debounce
        self.notifier = notifier
        self.on_reload = on_reload
        now = time.time()
        self._latest = first.version(now)  # the newest good policy: active, or handed over and next
        self._versions = {self._latest.plan.revision: self._latest}
        self._files = first.files
        self._fingerprint = fingerprint_of_known(first.fingerprint, first.files)
        self._last: ReloadOutcome | None = None
        self._last_failed = False
        self._reload_lock = threading.Lock()
        self._request = _Request()
        self._request_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._rewatch = threading.Event()  # ends the current watch: folders changed, or stopping
        self._threads: list[threading.Thread] = []
        self._watch_error: tuple[str, float] = ("", 0.0)
        self.watching: tuple[str, ...] = ()
        metrics.policy_last_reload_success.set(now)

    # --- the two threads -------------------------------------------------------------------
    def start(self, watch: bool = True) -> None:
        """The reload thread, and (`watch`) the folder watcher; without it, only request() reloads."""
        self._threads = [threading.Thread(target=self._reload_loop, name="policy-reload", daemon=True)]
        if watch:
            self._threads.append(threading.Thread(target=self._watch_loop, name="policy-watch", daemon=True))
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._rewatch.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)

    def request(self, trigger: str, *, force: bool = False) -> None:
        """Ask for a reload (from the watcher, or a signal handler: this only sets flags). `force`
        compiles even when no source changed (SIGHUP)."""
        now = time.monotonic()
        with self._request_lock:
            r = self._request
            if not r.pending:
                r.trigger, r.woken_at = trigger, now
            r.force = r.force or force
            r.pending = True
        self._wake.set()

    def _reload_loop(self) -> None:
        while True:
            self._wake.wait()
            if self._stopping.is_set():
                return
            self._wake.clear()
            with self._request_lock:
                r, self._request = self._request, _Request()
            if not r.pending:
                continue
            try:
                self.reload(r.trigger, force=r.force, woken_at=r.woken_at)
            except Exception:  # noqa: BLE001 - the reload thread must outlive any one reload
                log.exception("policy reload (%s) raised; revision %s keeps running", r.trigger,
                              self._latest.plan.revision)

    def _watch_loop(self) -> None:
        import watchfiles

        step_ms = max(1, round(self.debounce * 1000))
        # It logs every batch at INFO; our reload lines say what matters.
        logging.getLogger("watchfiles").setLevel(logging.WARNING)
        while not self._stopping.is_set():
            self._rewatch.clear()
            wanted = watch_folders(self._files)
            identity = folder_identity(wanted)
            existing = tuple(folder for folder, inode in identity if inode is not None)
            self.watching = existing
            if not existing:
                self._stopping.wait(FOLDER_CHECK_S)
                if folder_identity(wanted) != identity:
                    self.request("policy folder appeared")
                continue
            first = True
            try:
                # No watch_filter: filtered-out batches would not come back here, and a busy folder
                # would then starve the checks below.
                for changes in watchfiles.watch(*existing, watch_filter=None, step=step_ms,
                                                debounce=max(step_ms, round(MAX_BURST_S * 1000)),
                                                stop_event=self._rewatch, rust_timeout=round(FOLDER_CHECK_S * 1000),
                                                yield_on_timeout=True, recursive=False, raise_interrupt=False):
                    paths = source_paths(self._files)  # a failed reload may add sources in the same folders
                    if changes:
                        log.debug("changes in %s: %s", ", ".join(existing), sorted(path for _, path in changes))
                    if any(touches_sources(path, paths) for _, path in changes):
                        self.request("file change")
                    elif first:
                        # The watch is set up by now: whatever changed between the last compile and
                        # this point is caught by one check (a no-op when no source changed).
                        self.request("watch started")
                    first = False
                    if folder_identity(wanted) != identity:
                        self.request("policy folder replaced")
                        break
            except Exception as err:  # noqa: BLE001 - a folder vanishing mid-watch: watch again
                self._log_watch_error(err)
                self._stopping.wait(WATCH_ERROR_RETRY_S)

    def _log_watch_error(self, err: Exception) -> None:
        text, when = self._watch_error
        now = time.monotonic()
        if str(err) != text or now - when >= ERROR_LOG_EVERY_S:
            log.warning("watching the policy folders %s: %s: %s (watching again; SIGHUP reloads meanwhile)",
                        ", ".join(self.watching), type(err).__name__, err)
            self._watch_error = (str(err), now)

    # --- one reload --------------------------------------------------------------------------
    def reload(self, trigger: str = "manual", *, force: bool = False,
               woken_at: float | None = None) -> ReloadOutcome | None:
        """Compile the policy again if a source changed (always with `force`); hand it over if it
        has no errors. None when nothing changed."""
        with self._reload_lock:
            started = time.perf_counter()
            if not force and self._fingerprint is not None and fingerprint_of(self._files) == self._fingerprint:
                log.debug("policy check (%s): no source changed", trigger)
                return None
            attempt = attempt_compile(self.policy, self._files)
            previous_folders = watch_folders(self._files)
            if attempt.ok:
                self._files = attempt.files
                outcome = self._accept(attempt, trigger, started, woken_at)
            else:
                # Keep watching what the last good policy read as well: a fix may land in any of them.
                self._files = tuple(dict.fromkeys((*self._latest.files, *attempt.files)))
                outcome = self._reject(attempt, trigger, started, woken_at)
            self._fingerprint = fingerprint_of_known(attempt.fingerprint, self._files)
            self.metrics.policy_reload_latency.observe(outcome.seconds)
            if watch_folders(self._files) != previous_folders:
                self._rewatch.set()
            # The observer hears of an outcome before `last_outcome` shows it (both under the
            # lock, so reloads are told in order): whoever sees it there has been told.
            if self.on_reload is not None:
                self.on_reload(outcome)
            self._last = outcome
            if outcome.ok and outcome.changed:
                # Handed over last (taken at the next cycle's start): whoever sees the new
                # revision run (`describe`, which takes no lock) sees the reload that brought it.
                self.target.set_plan(self._latest.plan)
        return outcome

    def _accept(self, attempt: Attempt, trigger: str, started: float, woken_at: float | None) -> ReloadOutcome:
        now = time.time()
        version = attempt.version(now)
        previous = self._latest
        plan = version.plan
        changed = plan.revision != previous.plan.revision
        self._latest = version      # handed over by `reload` once the outcome shows
        active = self.target.plan.revision
        self._versions = {rev: v for rev, v in self._versions.items() if rev == active}
        self._versions[plan.revision] = version
        seconds = time.perf_counter() - started
        self.metrics.policy_reloads.labels(result="success").inc()
        self.metrics.policy_last_reload_success.set(now)
        for diag in attempt.compilation.diagnostics:
            if diag.severity == Severity.WARNING:
                log.warning("policy: %s", located(diag))
        if changed:
            log.info("policy reloaded (%s): %s revision %s -> %s in %.1f ms, from %s", trigger, plan.name,
                     previous.plan.revision, plan.revision, seconds * 1000, ", ".join(version.files))
        else:
            log.info("policy reloaded (%s): revision %s, the one already running or next (%.1f ms)", trigger,
                     plan.revision, seconds * 1000)
        if self.notifier is not None and (changed or self._last_failed):
            self.notifier.succeeded(version, previous.plan.revision)
        self._last_failed = False
        return ReloadOutcome(trigger, True, plan.revision, changed, (), seconds, woken_at, time.monotonic(), now)

    def _reject(self, attempt: Attempt, trigger: str, started: float, woken_at: float | None) -> ReloadOutcome:
        errors = [located(d) for d in attempt.errors] or [f"{attempt.main}: the policy produced no plan"]
        seconds = time.perf_counter() - started
        keeping = self._latest
        self.metrics.policy_reloads.labels(result="error").inc()
        log.error("policy reload (%s) failed with %d error(s); revision %s keeps running", trigger, len(errors),
                  keeping.plan.revision)
        for line in errors:
            log.error("  %s", line)
        if self.notifier is not None:
            try:
                self.notifier.failed(errors, keeping)
            except Exception:  # noqa: BLE001 - telling about a failure must not become one
                log.exception("reporting the failed reload")
        self._last_failed = True
        return ReloadOutcome(trigger, False, keeping.plan.revision, False, tuple(errors), seconds, woken_at,
                             time.monotonic(), time.time())

    # --- what it shows ------------------------------------------------------------------------
    @property
    def latest(self) -> PolicyVersion:
        return self._latest

    @property
    def last_outcome(self) -> ReloadOutcome | None:
        return self._last

    def ready(self) -> tuple[bool, str]:
        """Ready once a valid policy is active (the first one compiled clean, or we did not start)."""
        if self.target.plan is None:
            return False, "no valid policy active"
        return True, "ok"

    def describe(self) -> dict:
        """The /policy document: the active policy (what cycles run under), its sources and plan,
        the one handed over and not taken yet, and the last reload."""
        plan = self.target.plan
        version = self._versions.get(plan.revision)
        latest = self._latest
        last = self._last
        return {
            "name": plan.name,
            "version": plan.version,
            "revision": plan.revision,
            "main": version.main if version else latest.main,
            "sources": list(version.files) if version else [],
            "loaded_at": _iso(version.loaded_at) if version else None,
            "next_revision": latest.plan.revision if latest.plan.revision != plan.revision else None,
            "watching": list(self.watching),
            "last_reload": None if last is None else {
                "trigger": last.trigger, "result": "success" if last.ok else "error", "revision": last.revision,
                "changed": last.changed, "at": _iso(last.at), "seconds": round(last.seconds, 6),
                "errors": list(last.errors),
            },
            "plan": {**plan.to_dict(), "revision": plan.revision},
        }


def fingerprint_of_known(fingerprint: Fingerprint, files: Iterable[str]) -> Fingerprint | None:
    """`fingerprint` restricted to `files`, comparable with fingerprint_of(files); None when it
    misses one of them (an include the compile found that nobody hashed before: the next check
    must compile again rather than trust a hash taken after the compile read the file)."""
    known = dict(fingerprint)
    wanted = sorted(set(files))
    if any(f not in known for f in wanted):
        return None
    return tuple((f, known[f]) for f in wanted)


def _iso(unix: float) -> str:
    return dt.datetime.fromtimestamp(unix, dt.timezone.utc).isoformat(timespec="milliseconds")
