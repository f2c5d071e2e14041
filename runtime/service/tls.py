"""The serving certificate: the files given (`--tls-cert-file`, `--tls-private-key-file`, as
kube-scheduler's), else a self-signed one made at start and kept in memory-backed temporary
files only while it is loaded (kube-scheduler writes its own to --cert-dir; ours is never reused:
a restart makes a new one). Made with the `cryptography` package (a declared dependency), so no
`openssl` binary is needed in the image.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SELF_SIGNED_DAYS = 365


class TlsError(Exception):
    """The certificate or key cannot be used (the text says which and why)."""


def server_context(cert_file: str | None, key_file: str | None, hosts: tuple[str, ...] = (),
                   cert_dir: str | None = None, client_ca_file: str | None = None) -> ssl.SSLContext:
    """A TLS 1.2+ server context with the given pair, or a self-signed one for `hosts` (and
    localhost, 127.0.0.1, ::1 and this host's name), whose certificate (not its key) is written to
    `cert_dir`/policydsl.crt when given, for clients to trust. With `client_ca_file` (kube-scheduler's
    --client-ca-file), a client may present a certificate that CA signed: it is then who the
    certificate's CN says, in its O groups (auth.user_of_certificate); one it did not sign fails
    the handshake. A client without a certificate still may send a bearer token."""
    if bool(cert_file) != bool(key_file):
        raise TlsError("--tls-cert-file and --tls-private-key-file go together")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if client_ca_file:
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except (OSError, ssl.SSLError) as err:
            raise TlsError(f"cannot use {client_ca_file} as the client CA: {err}") from None
        context.verify_mode = ssl.CERT_OPTIONAL
    if cert_file and key_file:
        try:
            context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as err:
            raise TlsError(f"cannot use {cert_file} with {key_file}: {err}") from None
        return context
    cert_pem, key_pem = self_signed(hosts)
    if cert_dir:
        try:
            os.makedirs(cert_dir, exist_ok=True)
            with open(os.path.join(cert_dir, "policydsl.crt"), "wb") as out:
                out.write(cert_pem)
        except OSError as err:
            raise TlsError(f"cannot write the certificate to {cert_dir}: {err.strerror or err}") from None
    with tempfile.TemporaryDirectory(prefix="policydsl-tls-") as folder:
        cert_path, key_path = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key_pem)
        with open(cert_path, "wb") as out:
            out.write(cert_pem)
        context.load_cert_chain(cert_path, key_path)   # read now: the files go with the folder
    return context


def self_signed(hosts: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM): an ECDSA P-256 certificate for `hosts`, localhost and this host."""
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    seen: set[str] = set()
    for host in (*hosts, "localhost", socket.gethostname(), "127.0.0.1", "::1"):
        host = host.strip("[]")
        if not host or host in seen or host in ("0.0.0.0", "::"):
            continue
        seen.add(host)
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"policydsl@{socket.gethostname()}"[:64])])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
