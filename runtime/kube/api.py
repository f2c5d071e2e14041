"""JSON over the kubernetes client's authenticated connection pool.

The generated API classes validate every argument with pydantic and deserialize every answer
into typed models, which costs more CPU than the request itself when a scheduler issues
thousands of binds and reads thousands of watch events. `KubeApi` keeps the client's
configuration, authentication (kubeconfig, in-cluster, exec plugins) and urllib3 pool, and
speaks plain dicts: the API's own JSON, which `runtime.cluster.objects` parses.

    api = connect(kubeconfig="~/.kube/config")      # ConnectError says what is wrong
    pod = api.get("/api/v1/namespaces/default/pods/p")
    api.post(".../pods/p/binding", {...})            # ApiError(status, reason, message)
    api.post_many([(path, body), ...])               # pipelined: an answer or an ApiError each
    for event in api.watch("/api/v1/pods", {"resourceVersion": rv}): ...
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlencode

import urllib3

try:  # optional: parses the API's JSON 2-3x faster (a restart lists 100,000 pods: 180 MB of it)
    import orjson
except ImportError:  # pragma: no cover - the standard library's parser does the same, slower
    orjson = None

from runtime.kube.pipelining import Answer, Endpoint, Pipe, PipeError, Request, chunks
from runtime.kube.ratelimit import TokenBucket

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
# Generous pool: binds, evictions and status writes run concurrently, watches hold one each.
POOL_SIZE = 96
# Updates go one at a time over the kept-alive connections the pipelined binds use
# (runtime.kube.pipelining): the urllib3 pool's layers (http.client, its header parser,
# urllib3's response) cost several times the processor time of a bind per request, and a
# scheduler writes a PodGroup status per gang. Reads stay with the pool (lists can be long and
# streamed, and watches are), and so do creates: one sent on a connection the server closed as
# it was taken cannot be sent again safely.
PIPED_METHODS = frozenset({"PUT", "PATCH", "DELETE"})
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
TOKEN_REFRESH_S = 10.0


class ApiError(Exception):
    """A request failed. `status` is the HTTP status, 0 when no answer came (connection refused,
    reset, timed out)."""

    def __init__(self, status: int, reason: str, message: str = "", retry_after: float | None = None):
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        super().__init__(f"{status} {reason}: {message}" if status else f"no answer: {message}")

    @property
    def transient(self) -> bool:
        """Worth retrying: no answer, throttled, or a server-side error."""
        return self.status == 0 or self.status == 429 or self.status >= 500


class ConnectError(Exception):
    """The API server cannot be used: bad kubeconfig, unreachable, or credentials refused."""


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK | ERROR
    object: dict[str, Any]


class KubeApi:
    def __init__(self, api_client: Any, limiter: TokenBucket | None = None):
        self.client = api_client
        self.host = api_client.configuration.host
        self.limiter = limiter  # every request but watches waits for a token
        self._open: set[Any] = set()
        self._lock = threading.Lock()
        self._endpoint: Endpoint | None | bool = False  # False: not worked out yet
        self._idle_pipes: list[Pipe] = []
        self._closed = False

    # --- requests ------------------------------------------------------------------------
    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None,
                content_type: str = JSON, timeout: float = REQUEST_TIMEOUT_S,
                headers: Mapping[str, str] | None = None) -> Any:
        """Send one request (with `headers` added); the decoded JSON answer, or ApiError."""
        if self.limiter is not None:
            self.limiter.wait()
        if method in PIPED_METHODS and timeout == REQUEST_TIMEOUT_S:
            try:
                endpoint = self._pipe_endpoint()
            except (OSError, ValueError):
                endpoint = None     # the pool reports what is wrong with the TLS files
            if endpoint is not None:
                return self._piped(endpoint, method, path, query, body, content_type, headers)
        response = self._send(method, path, query, body, content_type, (CONNECT_TIMEOUT_S, timeout), headers)
        try:
            data = response.data
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiError(0, type(err).__name__, str(err)) from None
        if not 200 <= response.status < 300:
            raise _error_of(response.status, response.reason or "", data, response.headers.get("Retry-After"))
        return loads(data) if data else None

    def get(self, path: str, query: Mapping[str, Any] | None = None, timeout: float = REQUEST_TIMEOUT_S,
            headers: Mapping[str, str] | None = None) -> Any:
        return self.request("GET", path, query=query, timeout=timeout, headers=headers)

    def get_raw(self, path: str, headers: Mapping[str, str] | None = None,
                timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, str, bytes]:
        """(status, content type, body) of a GET whatever its status or type (a proxied page);
        ApiError only when no answer came."""
        if self.limiter is not None:
            self.limiter.wait()
        response = self._send("GET", path, None, None, JSON, (CONNECT_TIMEOUT_S, timeout), headers)
        try:
            return response.status, response.headers.get("Content-Type", ""), response.data
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiError(0, type(err).__name__, str(err)) from None

    def authorization(self) -> str | None:
        """The `Authorization: Bearer ...` value our credentials send (refreshed when due); None
        when they are something else (a client certificate, basic auth)."""
        headers = self._headers("GET", "/", JSON, None)
        value = headers.get("authorization") or headers.get("Authorization") or ""
        return value if value[:7].lower() == "bearer " else None   # basic auth is not ours to pass on

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body=body)

    def post_many(self, requests: Sequence[tuple[str, Any]], *,
                  allowed: Callable[[], bool] | None = None) -> list[Any] | None:
        """POST each (path, body), pipelined on one connection (runtime.kube.pipelining): for
        each, in order, its decoded answer or its ApiError. Status 0 means no answer came, so
        whether the server acted on the request is unknown. Through a proxy, one by one.
        `allowed` is asked once the rate limiter lets the batch go: False sends nothing (None)."""
        if not requests:
            return []
        try:
            endpoint = self._pipe_endpoint()
        except (OSError, ValueError) as err:  # the TLS files of the configuration (ssl.SSLError is an OSError)
            return [ApiError(0, "TLSError", str(err))] * len(requests)
        if endpoint is None:
            if allowed is not None and not allowed():
                return None
            return post_each(self.post, requests)
        if self.limiter is not None:
            for _ in requests:
                self.limiter.wait()
        if allowed is not None and not allowed():
            return None
        headers = self._headers("POST", requests[0][0], JSON, None)
        batch = [Request("POST", endpoint.path_prefix + path, headers, _json_body(body) or b"")
                 for path, body in requests]
        try:
            pipe = self._take_pipe(endpoint)
        except PipeError as err:
            return [ApiError(0, "ConnectionError", str(err))] * len(batch)
        answers = pipe.exchange(batch)
        self._give_back(pipe)
        return [_result_of(answer) for answer in answers]

    def _piped(self, endpoint: Endpoint, method: str, path: str, query: Mapping[str, Any] | None, body: Any,
               content_type: str, extra: Mapping[str, str] | None) -> Any:
        """One request on a kept-alive pipe: as `request` answers it (ApiError status 0: no answer)."""
        headers, target, data = self._prepared(method, path, query, body, content_type, extra)
        request = Request(method, endpoint.path_prefix + target, headers, data or b"")
        while True:
            try:
                pipe = self._take_pipe(endpoint)
            except PipeError as err:
                raise ApiError(0, "ConnectionError", str(err)) from None
            answer = pipe.exchange([request])[0]
            self._give_back(pipe)
            # A kept-alive connection the server closed just as it was taken: sent again on a
            # new one, as urllib3 does (an update can be).
            if answer is not None or pipe.exchanges == 1:
                break
        result = _result_of(answer)
        if isinstance(result, ApiError):
            raise result
        return result

    def _pipe_endpoint(self) -> Endpoint | None:
        if self._endpoint is False:
            self._endpoint = Endpoint.of(self.client.configuration)
        return self._endpoint  # type: ignore[return-value]

    def _take_pipe(self, endpoint: Endpoint) -> Pipe:
        while True:
            with self._lock:
                pipe = self._idle_pipes.pop() if self._idle_pipes else None
            if pipe is None:
                return Pipe.open(endpoint, CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S)
            if not pipe.closed_by_server():
                return pipe
            pipe.close()

    def _give_back(self, pipe: Pipe) -> None:
        if pipe.reusable:
            with self._lock:
                if not self._closed:
                    self._idle_pipes.append(pipe)
                    return
        pipe.close()

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body=body)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body=body, content_type=MERGE_PATCH)

    def delete(self, path: str, body: Any = None) -> Any:
        return self.request("DELETE", path, body=body)

    def watch(self, path: str, query: Mapping[str, Any], timeout_seconds: int) -> Iterator[WatchEvent]:
        """Events of one watch request until the server ends it (after `timeout_seconds`),
        the connection drops (ApiError status 0) or `close()` is called."""
        query = {**query, "watch": "true", "timeoutSeconds": str(timeout_seconds)}
        response = self._send("GET", path, query, None, JSON, (CONNECT_TIMEOUT_S, timeout_seconds + 30.0))
        if response.status != 200:
            raise _error_of(response.status, response.reason or "", response.data, None)
        with self._lock:
            self._open.add(response)
        raw_file = _chunked_body_file(response)
        try:
            for line in (_lines(response) if raw_file is None else _chunk_lines(raw_file)):
                if line:
                    raw = loads(line)
                    yield WatchEvent(raw.get("type", ""), raw.get("object") or {})
        except (urllib3.exceptions.HTTPError, OSError, PipeError, ValueError) as err:
            raise ApiError(0, type(err).__name__, str(err)) from None
        finally:
            with self._lock:
                self._open.discard(response)
            if raw_file is not None:
                response.close()    # read past the HTTP client's back: the connection is not reused
            response.release_conn()

    def close(self) -> None:
        """Unblock every open watch and drop the pool."""
        with self._lock:
            open_now = list(self._open)
            idle, self._idle_pipes = self._idle_pipes, []
            self._closed = True
        for pipe in idle:
            pipe.close()
        for response in open_now:
            try:
                response.shutdown()
            except Exception:  # noqa: BLE001 - closing a dying socket may fail any way it likes
                pass
        self.client.close()

    def _headers(self, method: str, path: str, content_type: str, body: Any) -> dict[str, str]:
        """The client's default headers and its credentials (refreshed by its hook when due)."""
        headers = {**self.client.default_headers, "Accept": JSON, "Content-Type": content_type}
        self.client.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        return headers

    def _prepared(self, method: str, path: str, query: Mapping[str, Any] | None, body: Any, content_type: str,
                  extra: Mapping[str, str] | None) -> tuple[dict[str, str], str, bytes | None]:
        """A request's headers (the client's, its credentials, `extra`), its path with the query,
        and its JSON body (None without one): the same for the pool and the pipes."""
        headers = self._headers(method, path, content_type, body)
        if extra:
            headers.update(extra)
        return headers, path + ("?" + urlencode(query) if query else ""), _json_body(body)

    def _send(self, method: str, path: str, query: Mapping[str, Any] | None, body: Any, content_type: str,
              timeout: tuple[float, float], extra: Mapping[str, str] | None = None) -> Any:
        # Straight to the client's urllib3 pool (TLS, proxy, CA and client certificates as its
        # configuration set them up): neither ApiClient.param_serialize, which re-reads
        # Configuration.host (scanning the environment for proxies) and sanitizes the body, nor
        # RESTClientObject.request, which matches the content type against four patterns, on
        # every one of thousands of binds; ours are plain JSON dicts.
        headers, target, data = self._prepared(method, path, query, body, content_type, extra)
        url = self.host + target
        try:
            return self.client.rest_client.pool_manager.urlopen(
                method, url, body=data, headers=headers, preload_content=False,
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]))
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiError(0, type(err).__name__, _short(err)) from None


def _json_body(body: Any) -> bytes | None:
    return None if body is None else json.dumps(body, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    """JSON as `json.loads` reads it; through orjson when installed, the standard library for
    what orjson refuses (integers beyond 64 bits, NaN)."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except ValueError:
            pass
    return json.loads(data)


def _chunked_body_file(response: Any) -> BinaryIO | None:
    """The buffered socket file a chunked, uncompressed watch answer's body is read from, or
    None (then urllib3 reads it). A watch is an event a chunk: urllib3's chunk reader and the
    generator layers around it cost more than the event's JSON does, on every pod's every change."""
    fp = getattr(response, "_fp", None)     # http.client.HTTPResponse, headers read and nothing more
    raw = getattr(fp, "fp", None)
    if raw is None or not getattr(fp, "chunked", False) or getattr(fp, "chunk_left", None) is not None \
            or response.headers.get("content-encoding") or not hasattr(raw, "readline"):
        return None
    return raw


def _chunk_lines(raw: BinaryIO) -> Iterator[bytes]:
    """The newline-delimited JSON of a chunked body read from `raw` (HTTP/1.1 chunked coding)."""
    return _split_lines(chunks(raw))


def _lines(response: Any) -> Iterator[bytes]:
    """The newline-delimited JSON of a watch, whatever the HTTP chunks."""
    return _split_lines(response.stream(amt=None, decode_content=False))


def _split_lines(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of the bytes `pieces` make together, however they are cut."""
    pending = b""
    for piece in pieces:
        parts = (pending + piece).split(b"\n")
        pending = parts.pop()
        yield from parts
    if pending.strip():
        yield pending


def post_each(post: Callable[[str, Any], Any], requests: Sequence[tuple[str, Any]]) -> list[Any]:
    """`post` each (path, body) in turn, as post_many answers: the answer or the ApiError."""
    out: list[Any] = []
    for path, body in requests:
        try:
            out.append(post(path, body))
        except ApiError as err:
            out.append(err)
    return out


def _result_of(answer: Answer | None) -> Any:
    """One pipelined answer as `request` would return or raise it (the error returned)."""
    if answer is None:
        return ApiError(0, "ConnectionError", "the connection ended before the answer")
    if not 200 <= answer.status < 300:
        return _error_of(answer.status, answer.reason, answer.body, answer.headers.get("retry-after"))
    try:
        return loads(answer.body) if answer.body else None
    except ValueError:
        return answer.body  # done all the same: the status says so


def _error_of(status: int, reason: str, data: bytes | None, retry_after: str | None) -> ApiError:
    message = ""
    if data:
        try:
            message = str(json.loads(data).get("message", ""))
        except (ValueError, AttributeError):
            message = data[:200].decode(errors="replace")
    try:
        delay = float(retry_after) if retry_after else None
    except ValueError:
        delay = None
    return ApiError(status, reason, message, delay)


def _short(err: BaseException) -> str:
    """urllib3 nests the cause several levels deep; the innermost says what happened."""
    reason = getattr(err, "reason", None)
    while isinstance(reason, BaseException) and getattr(reason, "reason", None) is not None:
        reason = reason.reason
    return str(reason or err).splitlines()[0][:300]


# --- connecting ------------------------------------------------------------------------------

def configuration(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A kubernetes client Configuration from `kubeconfig`, else in-cluster, else $KUBECONFIG or
    ~/.kube/config. Raises ConnectError with the reason."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    cfg = k8s_client.Configuration()
    try:
        if kubeconfig:
            path = Path(kubeconfig).expanduser()
            if not path.is_file():
                raise ConnectError(f"cannot read kubeconfig {kubeconfig}: "
                                   f"{'it is a folder' if path.is_dir() else 'no such file'}")
            k8s_config.load_kube_config(config_file=str(path), context=context, client_configuration=cfg,
                                        persist_config=False)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=cfg)
        else:
            named = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
            path = Path(named or "~/.kube/config").expanduser()
            if named and not path.is_file():
                # Set but wrong: saying "set KUBECONFIG" would send the user the wrong way.
                raise ConnectError(f"cannot read kubeconfig {named} (from $KUBECONFIG): "
                                   f"{'it is a folder' if path.is_dir() else 'no such file'}")
            if not path.is_file():
                raise ConnectError("no cluster configuration: pass --kubeconfig PATH, set KUBECONFIG, "
                                   "or run inside a pod (in-cluster config)")
            k8s_config.load_kube_config(config_file=str(path), context=context, client_configuration=cfg,
                                        persist_config=False)
    except ConnectError:
        raise
    except Exception as err:  # ConfigException, YAML errors, missing keys: all mean a bad file
        where = kubeconfig or "the cluster configuration"
        raise ConnectError(f"invalid kubeconfig {where}: {str(err).splitlines()[0] if str(err) else type(err).__name__}") \
            from None
    cfg.connection_pool_maxsize = POOL_SIZE
    if cfg.refresh_api_key_hook is not None:
        cfg.refresh_api_key_hook = _throttled(cfg.refresh_api_key_hook, TOKEN_REFRESH_S)
    return cfg


def _throttled(hook: Any, interval: float) -> Any:
    """The client runs its token refresh hook before *every* request, and the kubeconfig one
    re-applies the whole configuration (re-reading proxy settings from the environment):
    a third of a bind's client CPU. Tokens expire in minutes, not milliseconds. (That hook
    also installs itself again each time it runs; we put ourselves back in front of it.)"""
    inner = [hook]
    last = [float("-inf")]

    def refresh(cfg: Any) -> None:
        now = time.monotonic()
        if now - last[0] < interval:
            return
        last[0] = now
        inner[0](cfg)
        if cfg.refresh_api_key_hook is not refresh:
            inner[0] = cfg.refresh_api_key_hook
            cfg.refresh_api_key_hook = refresh

    return refresh


def connect(kubeconfig: str | None = None, context: str | None = None, *, qps: float = 0, burst: int = 0,
            probe_timeout: float = 10.0, user_agent: str | None = None) -> KubeApi:
    """A KubeApi whose server answered GET /version, or ConnectError saying why not. With
    `qps` > 0, requests (not watches) are limited to `qps` per second, bursts of `burst`.
    `user_agent` names us in the API server's logs and audit, and as the field manager of
    what we write (the client's default is its generator's name)."""
    from kubernetes import client as k8s_client

    cfg = configuration(kubeconfig, context)
    limiter = TokenBucket(qps, max(burst, 1)) if qps > 0 else None
    api_client = k8s_client.ApiClient(cfg)
    if user_agent:
        api_client.user_agent = user_agent
    api = KubeApi(api_client, limiter)
    try:
        api.request("GET", "/version", timeout=probe_timeout)
    except ApiError as err:
        api.close()
        if err.status in (401, 403):
            raise ConnectError(f"the API server at {cfg.host} refused our credentials ({err.status} {err.reason})") \
                from None
        raise ConnectError(f"cannot reach the API server at {cfg.host}: {err.message or err.reason}") from None
    return api
