"""Log lines a person can read during an outage: per kind of failing write, one line when the
failures start, a summary every SUMMARY_EVERY_S while they last, one line when they end.

    binds = OutageLog("binds", log)
    binds.failed("no answer (connection refused)", "ns/p")   # each failure; logs only the first
    binds.succeeded("ns/p")                                  # each success
    binds.tick()                                             # once a cycle: due summaries, the end

    WARNING binds failing: no answer (connection refused) (ns/p first)
    WARNING binds failing for 10 s: no answer (connection refused) x2,000; 500 pods waiting
    INFO    binds succeed again after 22 s of failures: no answer (connection refused) x4,400; ...

The API server down for 22 s with 500 pods waiting used to write 8,268 WARNING lines, one per
pod per cycle, growing with the pods waiting; this writes a handful, whatever their number.
A failure class ends once no failure came for QUIET_S, so a trickle of errors (1 bind in 100
answered 500) is one outage with its summaries, not a start and an end line per error.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

SUMMARY_EVERY_S = 10.0
QUIET_S = 5.0
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^\])'\"]+)")


def cause_of(detail: str, status: int) -> str:
    """The class of a failure from its text: "503 Service Unavailable", "no answer (connection
    refused)", "no answer (timed out)"; what a person reads in the summary and counts by."""
    if status:
        head = detail.split(":", 1)[0].strip()
        return head or str(status)
    text = detail.split(":", 1)[1] if detail.startswith("no answer:") else detail
    errno = _ERRNO.search(text)
    if errno:
        return f"no answer ({errno.group(1).strip().lower()})"
    lowered = text.lower()
    for known in ("timed out", "connection refused", "connection reset", "closed the connection",
                  "ended before the answer", "name or service not known"):
        if known in lowered:
            return f"no answer ({known})"
    return "no answer" if not text.strip() else f"no answer ({text.strip()[:60]})"


@dataclass
class _Outage:
    started: float
    first: str                     # the cause and object of the failure that started it
    last_failure: float
    last_line: float
    causes: Counter[str] = field(default_factory=Counter)   # since it started
    failures_since_line: int = 0


class OutageLog:
    """One kind of write failing (binds, evictions, PodGroup status, ...). `waiting` counts the
    objects whose last attempt failed (a failure adds one, a success removes it): "500 pods
    waiting". Thread-safe (binds settle on many workers)."""

    def __init__(self, what: str, logger: logging.Logger, *, noun: str = "pods", key_field: str = "pod",
                 summary_every_s: float = SUMMARY_EVERY_S, quiet_s: float = QUIET_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.noun = noun          # what `waiting` counts, in the summary
        self.key_field = key_field  # the structured log field the first failure's key goes in
        self.log = logger
        self.summary_every_s = summary_every_s
        self.quiet_s = quiet_s
        self.clock = clock
        self._outage: _Outage | None = None
        self._failing: set[str] = set()
        self._lock = threading.Lock()
        self.lines = 0  # lines written (tests)

    @property
    def active(self) -> bool:
        return self._outage is not None

    def failed(self, cause: str, key: str = "") -> None:
        now = self.clock()
        with self._lock:
            if key:
                self._failing.add(key)
            outage = self._outage
            if outage is None:
                self._outage = outage = _Outage(now, f"{cause} ({key} first)" if key else cause, now, now)
                outage.causes[cause] += 1
                self._write(logging.WARNING, f"{self.what} failing: {outage.first}", cause=cause, **{self.key_field: key})
                return
            outage.causes[cause] += 1
            outage.failures_since_line += 1
            outage.last_failure = now
            self._summary_if_due(now)

    def succeeded(self, key: str = "") -> None:
        with self._lock:
            if key:
                self._failing.discard(key)
            if self._outage is not None:
                self._end_if_quiet(self.clock())

    def forget(self, key: str) -> None:
        """The object is gone (or will not be tried again): it no longer waits."""
        with self._lock:
            self._failing.discard(key)

    def tick(self) -> None:
        with self._lock:
            if self._outage is not None:
                now = self.clock()
                if not self._end_if_quiet(now):
                    self._summary_if_due(now)

    # --- lines (the caller holds the lock) -------------------------------------------------------
    def _summary_if_due(self, now: float) -> None:
        outage = self._outage
        assert outage is not None
        if now - outage.last_line < self.summary_every_s:
            return
        outage.last_line = now
        lately = outage.failures_since_line
        outage.failures_since_line = 0
        self._write(logging.WARNING, f"{self.what} failing for {now - outage.started:.0f} s: {self._causes(outage)}; "
                    f"{len(self._failing):,} {self.noun} waiting, {lately:,} failures in the last "
                    f"{self.summary_every_s:.0f} s", seconds=round(now - outage.started, 1),
                    waiting=len(self._failing))

    def _end_if_quiet(self, now: float) -> bool:
        outage = self._outage
        assert outage is not None
        if now - outage.last_failure < self.quiet_s:
            return False
        self._outage = None
        lasted = outage.last_failure - outage.started
        self._write(logging.INFO, f"{self.what} succeed again after {lasted:.0f} s of failures: {self._causes(outage)}",
                    seconds=round(lasted, 1), waiting=len(self._failing))
        return True

    @staticmethod
    def _causes(outage: _Outage) -> str:
        return ", ".join(f"{cause} x{count:,}" for cause, count in outage.causes.most_common(3)) + \
            (f" and {len(outage.causes) - 3} more" if len(outage.causes) > 3 else "")

    def _write(self, level: int, message: str, **fields: object) -> None:
        self.lines += 1
        self.log.log(level, message, extra={"failure": self.what, **{k: v for k, v in fields.items() if v != ""}})


class LineBudget:
    """At most `lines` lines per `per_s` seconds for one kind of per-object line (a refused bind
    each: one line per pod, but not 5,000 in a second); what it holds back is counted and said
    in the next line it lets through."""

    def __init__(self, lines: int = 20, per_s: float = SUMMARY_EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.lines, self.per_s, self.clock = lines, per_s, clock
        self._window_start = -per_s
        self._used = 0
        self._held_back = 0
        self._lock = threading.Lock()

    def take(self) -> tuple[bool, int]:
        """(whether a line may go out now, lines held back before it, to say so)."""
        with self._lock:
            now = self.clock()
            if now - self._window_start >= self.per_s:
                self._window_start, self._used = now, 0
            if self._used >= self.lines:
                self._held_back += 1
                return False, 0
            self._used += 1
            held, self._held_back = self._held_back, 0
            return True, held
