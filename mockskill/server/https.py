"""A :class:`~mockskill.server.Server`'s HTTPS: its context, what clients trust, failed handshakes.

:class:`ServerTLS` holds the Server's TLS methods: the server context of
``tls``/``tls_cert`` (the user's certificate, or one made by the local CA of
:mod:`mockskill.transport.tls`), the CA bundle, client context and client
certificates a test hands its clients, and the journal entry of a handshake
that failed on a TLS fault's port (docs/tls.md). Apart from
:mod:`mockskill.server.server` because only a server that serves HTTPS needs them;
Server inherits them.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from ..engine.engine import Engine
from ..engine.state import DEFAULT_SESSION, Entry
from ..engine.store import Store
from ..transport.tls_faults import Failed, FaultListeners
from .listening import ServerError

if TYPE_CHECKING:
    from ..transport.tls import Authority


def tls_authority() -> Authority:
    """The local CA (:func:`mockskill.transport.tls.authority`), whose module is imported
    here on first use: only a server with ``--tls`` or a TLS fault asks for it."""
    from ..transport.tls import authority

    return authority()


class ServerTLS:
    """The TLS methods of :class:`~mockskill.server.Server` (see the module)."""

    # Set by Server.__init__:
    host: str
    tls: bool
    engine: Engine
    state: Store
    _tls_files: tuple[str, str] | None
    _tls_names: tuple[str, ...]
    _faults: FaultListeners

    @property
    def tls_fault_ports(self) -> dict[str, int]:
        """The port of each skill with a TLS fault (skill id -> port), as a descriptor
        fetched without a ``Mockskill-Session`` header names it (docs/tls.md)."""
        return self._faults.ports()

    @property
    def ca_bundle(self) -> str | None:
        """The path of the CA certificate (PEM) that signs this server's certificate, for
        ``requests.get(url, verify=server.ca_bundle)``; None without TLS, or with the
        user's own certificate (*tls_cert*)."""
        if not self.tls or self._tls_files is not None:
            return None
        return tls_authority().ca_bundle

    @property
    def client_context(self) -> ssl.SSLContext | None:
        """A client TLS context that trusts :attr:`ca_bundle` (None when that is None):
        ``httpx.Client(verify=server.client_context)`` (httpx 0.28 deprecates a path)."""
        bundle = self.ca_bundle
        return None if bundle is None else ssl.create_default_context(cafile=bundle)

    def client_certificate(self) -> bytes:
        """A client certificate (PEM: key, then certificate) from the server's CA: what a
        ``tls: client_cert_required`` skill accepts (``POST /__admin/tls/client-cert``)."""
        return tls_authority().client_certificate()

    def _tls_context(self) -> ssl.SSLContext | None:
        """The context of ``--tls``: the user's certificate, or one from the local CA."""
        if not self.tls:
            return None
        if self._tls_files is not None:
            cert, key = self._tls_files
            from ..transport.tls import own_context

            try:
                return own_context(cert, key)
            except (OSError, ssl.SSLError) as exc:
                raise ServerError(
                    f"cannot use the certificate {cert} with the key {key}: {exc}"
                ) from exc
        return tls_authority().server_context((self.host, *self._tls_names))

    def _journal_handshake(self, failed: Failed) -> None:
        """A handshake that failed on a TLS fault's port, in the journal (docs/tls.md): in
        the session the port was allotted to, else the default one."""
        state = self.state
        skill = next((s for s in self.engine.scenarios.skills if s.id == failed.skill), None)
        state.record(
            Entry(
                id=state.next_id(),
                started=failed.started,
                finished=failed.finished,
                session=failed.session or DEFAULT_SESSION,
                method="",
                path=f"/skills/{failed.skill}/invoke",
                status=None,
                endpoint="invoke",
                skill=failed.skill,
                scenario=skill.scenario if skill is not None else None,
                error_code="MOCKSKILL_TLS_HANDSHAKE_FAILED",
                tls=(failed.fault, failed.alert, failed.sni),
            )
        )
