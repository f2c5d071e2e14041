"""cdp: cooldown protection, as Volcano's cdp plugin.

A running pod whose `volcano.sh/cooldown-time` (label, else annotation; a Go duration such as
"600s" or "1h30m") has not passed since its PodScheduled condition turned True is no victim of
preempt or reclaim. A pod without the setting, with a value that is not a duration (Volcano logs a
warning and protects nothing), or whose scheduling time is not known is not protected."""

from __future__ import annotations

import logging
import re
import time

from runtime.cluster.model import POD_RUNNING, Pod
from runtime.engine.plugins.base import Plugin

COOLDOWN_TIME = "volcano.sh/cooldown-time"
log = logging.getLogger(__name__)

# Go's time.ParseDuration units, in seconds.
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_WHOLE = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration string ("600s", "1h30m", "-1.5h", "0"), or None when it is not one."""
    text = text.strip()
    if text in ("0", "+0", "-0"):
        return 0.0
    if not _WHOLE.fullmatch(text):
        return None
    sign = -1.0 if text.startswith("-") else 1.0
    return sign * sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))


def cooldown_seconds(pod: Pod) -> float | None:
    """The pod's cooldown (label first, as Volcano reads it), or None when it asks for none."""
    value = pod.labels.get(COOLDOWN_TIME)
    if value is None:
        value = pod.annotations.get(COOLDOWN_TIME)
    if value is None:
        return None
    seconds = go_duration(value)
    if seconds is None:
        log.warning("pod %s: %s=%r is not a duration; it is not protected", pod.key, COOLDOWN_TIME, value)
    return seconds


def cooling(pod: Pod, now: float) -> bool:
    """Whether the pod is still within its cooldown at `now`."""
    seconds = cooldown_seconds(pod)
    if seconds is None or pod.phase != POD_RUNNING or pod.scheduled_at is None:
        return False
    return pod.scheduled_at + seconds > now


class CooldownProtectionPlugin(Plugin):
    name = "cdp"
    answers = frozenset({"preemptable", "reclaimable"})

    def on_session_open(self, ssn) -> None:
        pods = ssn.snap.pods

        def evictable(preemptor: int, candidates: list[int]) -> list[int]:
            # The cycle's clock (set when the cycle starts, after plugins open); a session run
            # without one (a bare run_cycle) is at wall time, as Volcano's time.Now().
            now = ssn.now if ssn.now is not None else time.time()
            return [c for c in candidates if not cooling(pods[c], now)]

        self.register(ssn, "preemptable", evictable)
        self.register(ssn, "reclaimable", evictable)


PLUGIN = CooldownProtectionPlugin
