"""The HTTP side of Volcano's scheduler extender protocol (pkg/scheduler/plugins/extender): one
POST of a JSON body to `<urlPrefix>/<verb>` per question, the answer a JSON body (at most 10 MiB).

A cycle never waits on the extender without bound. Three bounds, per cycle (`ExtenderClient.open`
starts one):
- each call waits at most `timeout_s` (Volcano's extender.httpTimeout, default 1 s);
- once a verb fails to answer (timeout, refused connection, an HTTP status other than 200, a body
  that is not JSON), its later calls in the same cycle fail at once with the same error instead of
  waiting again: the extender is asked again next cycle;
- all calls of the cycle together take at most `budget_s` (`cycle_budget`: ten timeouts, between
  1 s and 30 s); calls once it is spent fail at once, saying so.
The caller (the extender plugin) decides what a failure means (`ignorable`)."""

from __future__ import annotations

import json
import logging
import threading
from time import monotonic
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

MAX_BODY = 10 << 20          # Volcano's maxBodySize
MIN_BUDGET_S, MAX_BUDGET_S = 1.0, 30.0


def cycle_budget(timeout_s: float) -> float:
    """The time all of one cycle's calls may take together."""
    return min(MAX_BUDGET_S, max(MIN_BUDGET_S, 10 * timeout_s))


def extender_key(pod: Any) -> tuple:
    """What tells pods apart for the extender plugin, which asks for a class of pods by its first:
    its job (PodGroup, else the pod itself), labels and annotations. Pods of one job alike in all of
    these (a vcjob task's replicas) get one answer; an extender deciding by a pod's name or UID alone
    is asked less often than Volcano asks it (per pod): runtime/README.md."""
    return (pod.namespace, pod.group or ("pod", pod.name), tuple(sorted(pod.labels.items())),
            tuple(sorted(pod.annotations.items())))


class ExtenderError(RuntimeError):
    """The extender did not give an answer; the text names the URL and what went wrong."""


@dataclass
class CycleCalls:
    """One cycle's bookkeeping: time spent, verbs that failed (and why), calls made."""

    budget_s: float
    spent_s: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    broken: str = ""             # set when the session could not open: every call fails with it


class ExtenderClient:
    def __init__(self, url_prefix: str, timeout_s: float):
        self.url_prefix = url_prefix.rstrip("/")
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self.cycle = CycleCalls(cycle_budget(timeout_s))
        self.reported: dict[str, str] = {}      # verb -> the failure last logged (until it answers again)

    def report(self, verb: str, error: str) -> bool:
        """Whether a verb's failure is news (not the one last logged): failures are logged once
        while they last, not every cycle."""
        with self._lock:
            if self.reported.get(verb) == error:
                return False
            self.reported[verb] = error
            return True

    def open(self) -> None:
        """Start a cycle: its budget whole, no verb failed."""
        with self._lock:
            self.cycle = CycleCalls(cycle_budget(self.timeout_s))

    def url(self, verb: str) -> str:
        return f"{self.url_prefix}/{verb}"

    def send(self, verb: str, body: Any, want_answer: bool = True) -> Any:
        """POST `body` as JSON to the verb; the decoded answer (None when not wanted). Raises
        ExtenderError, at once when the verb already failed this cycle or the budget is spent."""
        url = self.url(verb)
        with self._lock:
            cycle = self.cycle
            if cycle.broken:
                raise ExtenderError(cycle.broken)
            if verb in cycle.failed:
                raise ExtenderError(cycle.failed[verb])
            left = cycle.budget_s - cycle.spent_s
            if left <= 0:
                raise ExtenderError(f"{url}: not asked, the extender's time for this cycle ({cycle.budget_s:g} s) "
                                    "is spent")
            cycle.calls += 1
        started = monotonic()
        try:
            if left < self.timeout_s:    # the budget ends first: a call it cuts short says so
                try:
                    return self._post(url, body, left, want_answer)
                except ExtenderError:
                    if monotonic() - started >= left:
                        raise ExtenderError(f"{url}: no answer before the extender's time for this cycle "
                                            f"({cycle.budget_s:g} s) was spent") from None
                    raise
            answer = self._post(url, body, self.timeout_s, want_answer)
            if verb in self.reported:
                with self._lock:
                    self.reported.pop(verb, None)
                log.info("extender: %s answers again", url)
            return answer
        except ExtenderError as err:
            with self._lock:
                cycle.failed.setdefault(verb, str(err))
            raise
        finally:
            with self._lock:
                cycle.spent_s += monotonic() - started

    def _post(self, url: str, body: Any, timeout: float, want_answer: bool) -> Any:
        data = json.dumps(body, separators=(",", ":")).encode()
        request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                raw = answer.read(MAX_BODY + 1) if want_answer else b""
        except urllib.error.HTTPError as err:
            raise ExtenderError(f"{url}: answered HTTP {err.code}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                reason = f"no answer within {timeout:g} s"
            raise ExtenderError(f"{url}: {reason}") from None
        if not want_answer:
            return None
        if len(raw) > MAX_BODY:
            raise ExtenderError(f"{url}: answer larger than {MAX_BODY} bytes")
        try:
            return json.loads(raw)
        except ValueError:
            raise ExtenderError(f"{url}: the answer is not JSON") from None
