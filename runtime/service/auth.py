"""Delegated authentication and authorization of the scheduler's port, as kube-scheduler's
(k8s.io/apiserver's DelegatingAuthenticationOptions / DelegatingAuthorizationOptions):

    gate = Gate(api)                          # api: a runtime.kube.api.KubeApi
    who = gate.authenticate(headers)          # Denied(401) without a bearer token the API server accepts
    gate.require(who, NonResource("/metrics"))            # Denied(403) unless `get` on that URL
    gate.allowed(who, Resource("list", "pods", "team-a")) # a bool, for filtering

A bearer token (`Authorization: Bearer T`, or `X-Policydsl-Authorization: Bearer T`, which the
API server's service proxy passes on where it drops its own `Authorization`) is checked with a
TokenReview; each question with a SubjectAccessReview. Both answers are cached for a short
time (kube's defaults: 10 s for tokens and for allowed/denied decisions) in bounded LRU maps
(tokens keyed by their SHA-256, never kept in the clear), so a dashboard refresh or a scrape
costs no request and a flood of distinct tokens cannot grow memory. Reviews run on the HTTP
threads over the reviewer's own connection pool, never on the scheduling path. When the API
server cannot answer, the request is refused (503, not cached): failing open is not an option.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.kube.api import ApiError

TOKEN_TTL_S = 10.0          # --authentication-token-webhook-cache-ttl's delegated default
ALLOW_TTL_S = 10.0          # --authorization-webhook-cache-authorized-ttl's delegated default
DENY_TTL_S = 10.0           # --authorization-webhook-cache-unauthorized-ttl's delegated default
MAX_CACHED = 4096           # entries per cache (least recently used dropped)
REVIEW_TIMEOUT_S = 5.0
TOKEN_HEADERS = ("Authorization", "X-Policydsl-Authorization")
# kube-scheduler's --authorization-always-allow-paths default: the probes, open to anyone.
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")


@dataclass(frozen=True)
class User:
    """Who a TokenReview says the caller is."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class NonResource:
    """A non-resource URL (as /metrics in kube's RBAC: `nonResourceURLs: [/metrics]`)."""

    path: str
    verb: str = "get"


@dataclass(frozen=True)
class Resource:
    """A resource question; namespace "" means all namespaces."""

    verb: str
    resource: str
    namespace: str = ""
    group: str = ""
    name: str = ""


Attributes = NonResource | Resource

PODS = ""                        # core group
QUEUES = "scheduling.volcano.sh"
HYPERNODES = "topology.volcano.sh"


class Denied(Exception):
    """The request is refused: `status` 401 (who are you), 403 (not allowed) or 503 (the API
    server could not say)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _TtlCache:
    """A bounded LRU of values that expire after a per-entry TTL."""

    def __init__(self, max_entries: int, clock: Callable[[], float]) -> None:
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._max = max(1, max_entries)
        self._clock = clock
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False, None
            if entry[0] <= self._clock():
                del self._entries[key]
                return False, None
            self._entries.move_to_end(key)
            return True, entry[1]

    def put(self, key: Hashable, value: Any, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._entries[key] = (self._clock() + ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class Gate:
    """TokenReview and SubjectAccessReview through `api` (KubeApi-like: `post(path, body)`
    raising runtime.kube.api.ApiError), cached."""

    api: Any
    token_ttl: float = TOKEN_TTL_S
    allow_ttl: float = ALLOW_TTL_S
    deny_ttl: float = DENY_TTL_S
    max_cached: int = MAX_CACHED
    clock: Callable[[], float] = time.monotonic
    reviews: int = 0                       # requests made to the API server (tests, metrics)
    _tokens: _TtlCache = field(init=False)
    _decisions: _TtlCache = field(init=False)

    def __post_init__(self) -> None:
        self._tokens = _TtlCache(self.max_cached, self.clock)
        self._decisions = _TtlCache(self.max_cached, self.clock)

    # --- authentication ------------------------------------------------------------------------
    def authenticate(self, headers: Mapping[str, str] | Any, certificate: Mapping[str, Any] | None = None) -> User:
        """The caller: a client certificate the TLS handshake verified against --client-ca-file
        (as kube's x509 authenticator, tried first), else a bearer token through TokenReview."""
        if certificate:
            user = user_of_certificate(certificate)
            if user is not None:
                return user
        token = bearer_token(headers)
        if token is None:
            raise Denied(401, "Unauthorized: send a bearer token (Authorization: Bearer TOKEN) the API server "
                              "accepts")
        key = hashlib.sha256(token.encode()).digest()
        hit, user = self._tokens.get(key)
        if hit:
            if user is None:
                raise Denied(401, "Unauthorized: the API server does not accept this token")
            return user
        answer = self._post("/apis/authentication.k8s.io/v1/tokenreviews",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                             "spec": {"token": token}}, "TokenReview")
        status = answer.get("status") or {} if isinstance(answer, dict) else {}
        user = _user_of(status.get("user") or {}) if status.get("authenticated") else None
        if user is not None and not user.name:
            user = None
        self._tokens.put(key, user, self.token_ttl)
        if user is None:
            raise Denied(401, "Unauthorized: the API server does not accept this token")
        return user

    # --- authorization -------------------------------------------------------------------------
    def allowed(self, user: User, attributes: Attributes) -> bool:
        key = (user, attributes)
        hit, decision = self._decisions.get(key)
        if hit:
            return bool(decision)
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        if isinstance(attributes, NonResource):
            spec["nonResourceAttributes"] = {"path": attributes.path, "verb": attributes.verb}
        else:
            spec["resourceAttributes"] = {k: v for k, v in (
                ("verb", attributes.verb), ("resource", attributes.resource), ("group", attributes.group),
                ("namespace", attributes.namespace), ("name", attributes.name)) if v}
        answer = self._post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
                            "SubjectAccessReview")
        status = answer.get("status") or {} if isinstance(answer, dict) else {}
        decision = bool(status.get("allowed")) and not status.get("denied")
        self._decisions.put(key, decision, self.allow_ttl if decision else self.deny_ttl)
        return decision

    def require(self, user: User, attributes: Attributes) -> None:
        if not self.allowed(user, attributes):
            raise Denied(403, f"Forbidden: user {user.name!r} may not {describe(attributes)}")

    def _post(self, path: str, body: dict[str, Any], kind: str) -> Any:
        self.reviews += 1
        try:
            return self.api.post(path, body)
        except ApiError as err:
            raise Denied(503, f"the API server could not answer a {kind} ({err.status or 'no answer'}): "
                              "try again") from None


def bearer_token(headers: Mapping[str, str] | Any) -> str | None:
    for name in TOKEN_HEADERS:
        value = headers.get(name)
        if not value:
            continue
        scheme, _, token = str(value).strip().partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token and " " not in token:
            return token
    return None


def describe(attributes: Attributes) -> str:
    if isinstance(attributes, NonResource):
        return f"{attributes.verb} the non-resource URL {attributes.path}"
    what = attributes.resource + (f".{attributes.group}" if attributes.group else "")
    name = f" {attributes.name!r}" if attributes.name else ""
    where = f" in namespace {attributes.namespace!r}" if attributes.namespace else " in all namespaces" \
        if attributes.resource not in ("queues", "hypernodes") else ""
    return f"{attributes.verb} {what}{name}{where}"


def user_of_certificate(certificate: Mapping[str, Any]) -> User | None:
    """A verified client certificate as kube's x509 authenticator reads it: the subject's CN is
    the user name, each O a group (and system:authenticated); None without a CN."""
    names: list[tuple[str, str]] = [pair for rdn in certificate.get("subject") or () for pair in rdn]
    common = [value for key, value in names if key == "commonName"]
    if not common or not common[0]:
        return None
    groups = tuple(value for key, value in names if key == "organizationName")
    return User(name=common[0], groups=(*groups, "system:authenticated"))


def _user_of(raw: Mapping[str, Any]) -> User:
    extra = raw.get("extra") or {}
    return User(name=str(raw.get("username") or ""), uid=str(raw.get("uid") or ""),
                groups=tuple(str(g) for g in raw.get("groups") or ()),
                extra=tuple(sorted((str(k), tuple(str(x) for x in v or ())) for k, v in extra.items()))
                if isinstance(extra, Mapping) else ())


@dataclass(frozen=True)
class Viewer:
    """One authenticated caller: what the views ask before showing a thing."""

    gate: Gate
    user: User

    def may(self, attributes: Attributes) -> bool:
        return self.gate.allowed(self.user, attributes)

    def require(self, attributes: Attributes) -> None:
        self.gate.require(self.user, attributes)

    def sees_namespace(self, namespace: str) -> bool:
        """May list pods in `namespace`: what a pending job's name and reason need."""
        return self.may(Resource("list", "pods", namespace))

    def sees_all_namespaces(self) -> bool:
        return self.may(Resource("list", "pods"))


MAX_NAMESPACE_REVIEWS = 64   # per request: a list spanning more namespaces shows the rest as hidden


def namespaces_visible_to(viewer: Viewer) -> Callable[[str], bool]:
    """Whether the caller may list pods in a namespace: one review when it may in all, else one per
    namespace (cached by the gate), at most MAX_NAMESPACE_REVIEWS new ones per request, so a long
    list across many namespaces costs the API server a bounded number of reviews (the rest hidden)."""
    if viewer.sees_all_namespaces():
        return lambda namespace: True
    seen: dict[str, bool] = {}

    def visible(namespace: str) -> bool:
        if namespace not in seen:
            seen[namespace] = len(seen) < MAX_NAMESPACE_REVIEWS and viewer.sees_namespace(namespace)
        return seen[namespace]

    return visible
