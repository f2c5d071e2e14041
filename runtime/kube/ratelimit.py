"""A token bucket: `rate` tokens per second, at most `burst` saved up. Thread-safe.

The client's QPS limit (every request but watches) and the Events limit use it. The Python
kubernetes client has no limiter of its own, unlike client-go (whose default of 5 QPS, or
kube-scheduler's 50, would throttle a scheduler binding hundreds of pods per second); ours
defaults high enough to never be the bound, and is there to protect a shared API server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a rate limit needs rate > 0 and burst >= 1 (got {rate}, {burst})")
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.stamp = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token: 0 if one was there, else how long until it will be (already taken)."""
        with self._lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            self.tokens -= 1
            return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def try_take(self) -> bool:
        """Take a token if one is there; False (nothing taken) if not: for writes that can wait
        for a later cycle instead of blocking this one."""
        with self._lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            return False

    def wait(self) -> None:
        delay = self.reserve()
        if delay:
            time.sleep(delay)
