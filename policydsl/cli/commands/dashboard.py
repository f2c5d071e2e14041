"""`policydsl dashboard [--kubeconfig PATH]`: the running scheduler's dashboard in your browser, as
you: a forwarder on loopback that passes each page request on with your kubeconfig's bearer token,
through the API server's proxy to the scheduler's Service (`https:NAME:PORT`, the token in
X-Policydsl-Authorization, which the proxy passes on), or straight to `--scheduler URL` (e.g. after
`kubectl port-forward`, TLS checked against `--certificate-authority`). The scheduler then shows
what your RBAC lets you see (docs/observability.md). As with `kubectl proxy`, whoever can reach the
forwarder's loopback port reads as you: it listens on loopback only.
"""

from __future__ import annotations

import argparse
import signal
import ssl
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from policydsl.cli.flags import existing_path, listen_address, nonempty, scheduler_url, service_ref
from policydsl.cli.commands.live import CALLER_HEADER, DEFAULT_SERVICE, TIMEOUT_S

HELP = "serve the running scheduler's dashboard on loopback, forwarding with your own credentials"
DESCRIPTION = (
    "Listen on --address (loopback) and forward each GET to the scheduler with the bearer token of your "
    "kubeconfig: through the API server's proxy to its Service (--scheduler-service), or to --scheduler URL. "
    "Open http://ADDRESS/ui. Exit 2 when the kubeconfig has no bearer token or the address cannot be bound."
)
PAGE_HEADERS = ("Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy",
                "Retry-After", "WWW-Authenticate")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=existing_path("the kubeconfig path", "file"), metavar="PATH",
                        help="whose credentials to forward with (default: in-cluster config, else $KUBECONFIG or "
                             "~/.kube/config)")
    parser.add_argument("--context", type=nonempty("the context"), help="kubeconfig context (default: the current one)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scheduler-service", type=service_ref, default=DEFAULT_SERVICE, metavar="NAMESPACE/NAME[:PORT]",
                       help=f"the scheduler's Service, reached through the API server (default: {DEFAULT_SERVICE})")
    where.add_argument("--scheduler", type=scheduler_url, metavar="URL",
                       help="the scheduler's port itself, e.g. https://127.0.0.1:8080 after `kubectl port-forward`")
    parser.add_argument("--certificate-authority", type=existing_path("the certificate", "file"), metavar="FILE",
                        help="with --scheduler https://...: the CA (or the self-signed certificate its --cert-dir "
                             "holds) to check the scheduler's certificate against")
    parser.add_argument("--insecure-skip-tls-verify", action="store_true",
                        help="with --scheduler https://...: do not check its certificate (your token goes to "
                             "whoever answers)")
    parser.add_argument("--address", type=listen_address, default="127.0.0.1:8001", metavar="HOST:PORT",
                        help="where to listen, loopback only; port 0 picks one (default: 127.0.0.1:8001)")


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.kube.api import ApiError, ConnectError, connect
    from runtime.service.tls import is_loopback

    host, _, port = args.address.rpartition(":")
    if not is_loopback(host):
        print(f"policydsl dashboard: --address {args.address}: loopback only (whoever reaches it reads as you)",
              file=sys.stderr)
        return 2
    if args.scheduler and args.scheduler.startswith("https://") and not (args.certificate_authority or
                                                                          args.insecure_skip_tls_verify):
        print("policydsl dashboard: --scheduler https://... needs --certificate-authority FILE (or "
              "--insecure-skip-tls-verify): your token must not go to whoever answers", file=sys.stderr)
        return 2
    try:
        api = connect(args.kubeconfig, args.context)
    except ConnectError as err:
        print(f"policydsl dashboard: {err}", file=sys.stderr)
        return 2
    if not api.authorization():
        print("policydsl dashboard: this kubeconfig authenticates without a bearer token (a client certificate?); "
              "the scheduler reviews tokens: use a kubeconfig with one (e.g. from `kubectl create token`)",
              file=sys.stderr)
        api.close()
        return 2
    context = None
    if args.scheduler and args.scheduler.startswith("https://"):
        context = ssl.create_default_context(cafile=args.certificate_authority)
        if args.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    namespace, _, rest = args.scheduler_service.partition("/")
    name, _, service_port = rest.partition(":")
    prefix = f"/api/v1/namespaces/{namespace}/services/https:{name}:{service_port}/proxy"

    def forward(path: str) -> tuple[int, str, bytes, dict[str, str]]:
        token = api.authorization() or ""
        if path.startswith(prefix):   # the API server's proxy rewrote the page's links to its own path
            path = path[len(prefix):] or "/"
        if args.scheduler:
            request = urllib.request.Request(args.scheduler + path, headers={"Authorization": token})
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
                    return response.status, response.headers.get("Content-Type", ""), response.read(), \
                        dict(response.headers)
            except urllib.error.HTTPError as err:
                return err.code, err.headers.get("Content-Type", ""), err.read(), dict(err.headers)
            except (urllib.error.URLError, OSError) as err:
                return 502, "text/plain", f"the scheduler did not answer: {getattr(err, 'reason', err)}\n".encode(), {}
        try:
            status, content_type, body = api.get_raw(prefix + path, headers={CALLER_HEADER: token},
                                                     timeout=TIMEOUT_S)
        except ApiError as err:
            return 502, "text/plain", f"the API server did not answer: {err}\n".encode(), {}
        return status, content_type, body, {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
            status, content_type, body, headers = forward(self.path)
            self.send_response(status)
            self.send_header("Content-Type", content_type or "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            for key in PAGE_HEADERS:
                if headers.get(key):
                    self.send_header(key, headers[key])
            if "Content-Security-Policy" not in headers:   # through the proxy: the page's own is not passed on
                self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; "
                                 "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
                self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self) -> None:  # noqa: N802 - the http.server protocol
            self.do_GET()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - page loads are not news
            return

    try:
        server = ThreadingHTTPServer((host, int(port)), Handler)
    except OSError as err:
        print(f"policydsl dashboard: cannot listen on {args.address}: {err.strerror or err}", file=sys.stderr)
        api.close()
        return 2
    server.daemon_threads = True
    bound = f"{server.server_address[0]}:{server.server_address[1]}"
    target = args.scheduler or f"service {args.scheduler_service} through the API server"
    print(f"dashboard on http://{bound}/ui (forwarding to {target} with your credentials; Ctrl-C stops)", flush=True)
    stopped = threading.Event()

    def stop(signum: int, frame: object) -> None:
        if not stopped.is_set():
            stopped.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        api.close()
    return 0
