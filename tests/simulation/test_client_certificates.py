"""Client certificates (issue 30: "every request authenticated ... and client certificates where
configured"), as kube-scheduler's --client-ca-file: a certificate the CA signed makes the caller its
CN in its O groups, authorized by SubjectAccessReview like a token; a certificate another CA
signed fails the handshake; without a certificate a bearer token still works."""

from __future__ import annotations

import datetime
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from runtime.kube.metrics import Metrics
from runtime.service.auth import Gate, user_of_certificate
from runtime.service.server import MetricsServer
from runtime.service.tls import TlsError, server_context
from runtime.service.webapi import routes
from test_secure_serving import FakeApiServer, fake, view  # noqa: F401 - fixtures shared with that file


def _name(cn: str, org: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(parts)


def _certificate(subject: x509.Name, issuer: x509.Name, key, signer, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
               .not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    return builder.sign(signer, hashes.SHA256())


def authority(tmp: Path, name: str):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(_name(name), _name(name), key, key, ca=True)
    path = tmp / f"{name}.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, path


def client(tmp: Path, ca_key, ca_cert, cn: str, org: str | None) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(_name(cn, org), ca_cert.subject, key, ca_key, ca=False)
    cert_path, key_path = tmp / f"{cn}.crt", tmp / f"{cn}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def server(tmp_path, view, fake):  # noqa: F811 - the shared fixtures
    ca_key, ca_cert, ca_path = authority(tmp_path, "clients-ca")
    gate = Gate(fake.api())
    served = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (True, "ok"), healthy=lambda: (True, "ok"),
                           policy=lambda: {"name": "secure"}, routes=routes(view),
                           tls=server_context(None, None, client_ca_file=str(ca_path)), gate=gate)
    served.start()
    yield served.url, ca_key, ca_cert, fake
    served.stop()


def get(url: str, cert: tuple[Path, Path] | None = None, token: str | None = None) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(*map(str, cert))
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_a_certificate_the_ca_signed_is_its_cn_in_its_groups(server, tmp_path):
    url, ca_key, ca_cert, fake = server
    admin = client(tmp_path, ca_key, ca_cert, "admin", "ops")
    assert get(url + "/metrics", cert=admin) == 200
    reviews = [r for r in fake.reviews if r["kind"] == "SubjectAccessReview"]
    assert reviews and reviews[-1]["spec"]["user"] == "admin"
    assert set(reviews[-1]["spec"]["groups"]) == {"ops", "system:authenticated"}
    assert not any(r["kind"] == "TokenReview" for r in fake.reviews)      # no token to review


def test_a_certified_user_without_the_right_is_forbidden(server, tmp_path):
    url, ca_key, ca_cert, _ = server
    tenant = client(tmp_path, ca_key, ca_cert, "system:serviceaccount:team-c:nobody", None)
    assert get(url + "/metrics", cert=tenant) == 403


def test_a_certificate_another_ca_signed_fails_the_handshake(server, tmp_path):
    url, *_ = server
    other_key, other_cert, _ = authority(tmp_path, "someone-else")
    stranger = client(tmp_path, other_key, other_cert, "admin", None)
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        get(url + "/metrics", cert=stranger)


def test_without_a_certificate_a_token_still_works(server):
    url, *_ = server
    assert get(url + "/metrics", token="admin-token") == 200
    assert get(url + "/metrics") == 401


def test_a_certificate_without_a_common_name_is_no_one():
    assert user_of_certificate({"subject": ((("organizationName", "ops"),),)}) is None


def test_a_client_ca_that_cannot_be_read_is_a_clear_error(tmp_path):
    bad = tmp_path / "ca.crt"
    bad.write_text("not a certificate")
    with pytest.raises(TlsError, match="cannot use .* as the client CA"):
        server_context(None, None, client_ca_file=str(bad))
