"""A stand-in's loop: a thread that polls the API server while a test's `with` block runs."""

from __future__ import annotations

import threading
from typing import Self

from runtime.kube.api import ApiError


class Poller:
    """Calls `poll()` every `interval` seconds from `__enter__` to `__exit__`. An ApiError (an
    object deleted meanwhile, the API server restarting) just waits for the next round."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def poll(self) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except ApiError:
                pass
            self._stop.wait(self.interval)
