"""Certificates and TLS contexts: a local CA made at start, and what each TLS fault serves.

:class:`Authority` is one server's certificate authority, made with ``trustme`` (a
well-kept library for exactly this: a CA issuing leaf certificates, built on
``cryptography``). Its key is made once per process and shared by every Server in
it (:func:`authority`): an EC P-256 key takes a millisecond, but a test suite
starting a hundred servers need not pay it a hundred times, and a consumer given
the CA once trusts every server of the process. Leaf keys are EC P-256 too.

- :meth:`Authority.server_context` is the context of ``--tls``: a leaf for every
  name and address the server is reached by (localhost, 127.0.0.1, ::1, the bound
  host, the ``--tls-name``\\ s), or the user's own ``--tls-cert``/``--tls-key``
  (:func:`own_context`).
- :meth:`Authority.fault_context` is the context of a TLS fault's listener
  (:mod:`.tls_faults`): an expired leaf, one for another host, one from a CA the
  consumer was not given, a self-signed one, an RSA-1024 one, a listener that asks
  for a client certificate, one that speaks only TLS 1.0.
  A fault's context (:class:`FaultContext`) keeps the alert of a handshake it
  refuses, so that the listener sends it before it closes, as a real server does.
- :meth:`Authority.client_certificate` issues a client certificate (PEM, key and
  certificate in one) that the ``client_cert_required`` listener accepts.

The CA certificate is written to a file (:attr:`Authority.ca_bundle`), the path a
client passes as ``verify=``; it is removed when the process exits.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import ipaddress
import os
import ssl
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trustme

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
"""Names and addresses every ``--tls`` certificate holds."""

WRONG_HOST = "wrong-host.mockskill.invalid"
"""The only name the ``wrong_host`` fault's certificate holds (``.invalid``: never a real host)."""


class Authority:
    """A local CA: the server's certificate, the faults' certificates, client certificates."""

    def __init__(self) -> None:
        # Here, not at the top: a plain-HTTP server never loads them (trustme is most of
        # --tls's start-up; shutil, with bz2 and lzma, and tempfile would weigh on every one).
        import shutil
        import tempfile

        import trustme

        self.ca = trustme.CA(organization_name="mockskill local CA")
        self.ca_pem = self.ca.cert_pem.bytes()
        self._dir = Path(tempfile.mkdtemp(prefix="mockskill-tls-"))
        atexit.register(shutil.rmtree, self._dir, True)
        self.ca_bundle = str(self._dir / "ca.pem")
        """The path of the CA certificate (PEM): what a client passes as ``verify=``."""
        Path(self.ca_bundle).write_bytes(self.ca_pem)
        self._lock = threading.RLock()
        self._contexts: dict[tuple[str, ...], ssl.SSLContext] = {}
        self._count = 0

    def server_context(self, names: Iterable[str] = ()) -> ssl.SSLContext:
        """A server context with a leaf from this CA for :data:`LOCAL_NAMES` and *names*."""
        wanted = tuple(dict.fromkeys(n.strip("[]") for n in (*LOCAL_NAMES, *names) if n))
        wanted = tuple(n for n in wanted if n not in ("0.0.0.0", "::"))
        with self._lock:
            context = self._contexts.get(wanted)
            if context is None:
                context = _server_context()
                self.ca.issue_cert(*wanted, common_name=wanted[0]).configure_cert(context)
                self._contexts[wanted] = context
            return context

    def fault_context(self, fault: str, names: Iterable[str] = ()) -> ssl.SSLContext:
        """The context a listener of TLS fault *fault* serves: one done by a certificate or a
        context (a real handshake that fails), any TLS fault but ``tls_faults.RAW_FAULTS``."""
        key = ("fault", fault, *names)
        with self._lock:
            context = self._contexts.get(key)
            if context is None:
                context = self._contexts[key] = self._fault_context(fault, names)
            return context

    def _fault_context(self, fault: str, names: Iterable[str]) -> ssl.SSLContext:
        hosts = tuple(dict.fromkeys((*LOCAL_NAMES, *(n.strip("[]") for n in names))))
        hosts = tuple(n for n in hosts if n not in ("0.0.0.0", "::"))
        now = datetime.datetime.now(datetime.UTC)
        context = _server_context(FaultContext)
        if fault == "expired":
            leaf = self.ca.issue_cert(
                *hosts,
                not_before=now - datetime.timedelta(days=30),
                not_after=now - datetime.timedelta(days=1),
            )
            leaf.configure_cert(context)
        elif fault == "not_yet_valid":
            leaf = self.ca.issue_cert(
                *hosts,
                not_before=now + datetime.timedelta(days=1),
                not_after=now + datetime.timedelta(days=30),
            )
            leaf.configure_cert(context)
        elif fault == "wrong_host":
            self.ca.issue_cert(WRONG_HOST).configure_cert(context)
        elif fault == "untrusted":
            _other_ca().issue_cert(*hosts).configure_cert(context)
        elif fault == "self_signed":
            # A CA's own certificate is self-signed: served as the leaf, with its key.
            other = _other_ca()
            cert, key = self._file("self-signed.pem"), self._file("self-signed.key")
            other.cert_pem.write_to_path(cert)
            other.private_key_pem.write_to_path(key)
            context.load_cert_chain(cert, key)
        elif fault == "weak_key":
            _weak_leaf(self, hosts, context)
        elif fault == "client_cert_required":
            self.ca.issue_cert(*hosts).configure_cert(context)
            context.verify_mode = ssl.CERT_REQUIRED
            self.ca.configure_trust(context)
        elif fault == "protocol_version":
            self.ca.issue_cert(*hosts).configure_cert(context)
            # TLS 1.0 only: what current clients (and OpenSSL's default security level)
            # refuse. The server side lowers its own level to be able to offer it.
            context.set_ciphers("DEFAULT:@SECLEVEL=0")
            with warnings.catch_warnings():  # deprecated: the very point of this fault
                warnings.simplefilter("ignore", DeprecationWarning)
                context.minimum_version = ssl.TLSVersion.TLSv1
                context.maximum_version = ssl.TLSVersion.TLSv1
        else:
            raise ValueError(f"not a certificate fault: {fault!r}")
        return context

    def client_certificate(self, name: str = "mockskill-client") -> bytes:
        """A client certificate from this CA (PEM: private key, then certificate)."""
        leaf = self.ca.issue_cert(name)
        return leaf.private_key_and_cert_chain_pem.bytes()

    def _file(self, name: str) -> str:
        with self._lock:
            self._count += 1
            return str(self._dir / f"{self._count}-{name}")


def _server_context(kind: type[ssl.SSLContext] = ssl.SSLContext) -> ssl.SSLContext:
    context = kind(ssl.PROTOCOL_TLS_SERVER)
    context.set_alpn_protocols(["http/1.1"])
    return context


class RefusedHandshake(ssl.SSLError):
    """A handshake that failed, and what it left to send: the alert for the client (made by
    :class:`AlertKeeping`; empty when the client failed it and said so itself)."""

    def __init__(self, cause: ssl.SSLError, alert: bytes) -> None:
        super().__init__(*cause.args)
        self.reason = cause.reason
        self.library = cause.library
        self.alert = alert


class AlertKeeping(ssl.SSLObject):
    """An SSLObject whose failed handshake raises :class:`RefusedHandshake`, with the
    bytes the failure left in its outgoing BIO: the alert OpenSSL wrote for the client.

    asyncio's TLS transport drops that BIO when a handshake fails, so a refusal made on
    this side (no client certificate, no common protocol version) would end as a bare
    close; a real server (``openssl s_server``) sends the alert first."""

    outgoing: ssl.MemoryBIO | None = None

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as exc:
            unsent = self.outgoing.read() if self.outgoing is not None else b""
            raise RefusedHandshake(exc, unsent) from exc


class FaultContext(ssl.SSLContext):
    """The context of a TLS fault's port: its SSLObjects keep a refused handshake's alert."""

    sslobject_class = AlertKeeping

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        sslobj = super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        if isinstance(sslobj, AlertKeeping):
            sslobj.outgoing = outgoing
        return sslobj


def own_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context of the user's own certificate (chain) and key files (PEM)."""
    context = _server_context()
    context.load_cert_chain(cert, key)
    return context


@functools.lru_cache(maxsize=1)
def _other_ca() -> trustme.CA:
    """A CA no consumer is given (the ``untrusted`` and ``self_signed`` faults)."""
    import trustme

    return trustme.CA(organization_name="mockskill untrusted CA")


def _weak_leaf(authority: Authority, hosts: tuple[str, ...], context: ssl.SSLContext) -> None:
    """An RSA-1024 leaf from the CA: signed correctly, refused for its key's size.

    trustme makes only 2048-bit RSA keys, so this one is built with ``cryptography``
    (which trustme builds on). The server's own security level is lowered to load it.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    ca_cert = x509.load_pem_x509_certificate(authority.ca_pem)
    ca_key = serialization.load_pem_private_key(authority.ca.private_key_pem.bytes(), None)
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    cert_path, key_path = authority._file("weak.pem"), authority._file("weak.key")
    Path(cert_path).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    Path(key_path).write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(key_path, 0o600)
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    context.load_cert_chain(cert_path, key_path)


_AUTHORITY: Authority | None = None
_AUTHORITY_LOCK = threading.Lock()


def authority() -> Authority:
    """This process's CA, made on first use (its key shared by every Server in the process)."""
    global _AUTHORITY
    with _AUTHORITY_LOCK:
        if _AUTHORITY is None:
            _AUTHORITY = Authority()
        return _AUTHORITY
