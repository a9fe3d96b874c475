"""A :class:`~mockskill.server.Server`'s HTTPS: its context, what clients trust, failed handshakes.

:class:`ServerTLS` is what a Server owns for HTTPS: the server context of
``tls``/``tls_cert`` (the user's certificate, or one made by the local CA of
:mod:`mockskill.transport.tls`), the CA bundle, client context and client
certificates a test hands its clients, and the TLS faults' own ports
(docs/tls.md). :func:`journal_handshake` journals a handshake that failed on
such a port. Apart from :mod:`mockskill.server.server` because only a server
that serves HTTPS or a TLS fault needs them; the Server delegates to them.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..engine.engine import Engine
from ..engine.state import DEFAULT_SESSION, Entry
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
    """One server's HTTPS on *host*: served when *on*, with the certificate and key in
    *files* (None: one from the local CA for *host* and *names*); the TLS faults' ports,
    which report each failed handshake to *journal*."""

    def __init__(
        self,
        host: str,
        *,
        on: bool,
        files: tuple[str, str] | None,
        names: Iterable[str],
        journal: Callable[[Failed], None],
    ) -> None:
        self.host = host
        self.on = on
        self.files = files
        self.names = tuple(names)
        self.faults = FaultListeners(host, tls_authority, journal, names=self.names)
        """The ports of the skills with a TLS fault (the engine names them in descriptors)."""

    def fault_ports(self) -> dict[str, int]:
        """The port of each skill with a TLS fault (skill id -> port)."""
        return self.faults.ports()

    def ca_bundle(self) -> str | None:
        """The path of the local CA's certificate (PEM) that signs the server's certificate;
        None without TLS, or with the user's own certificate."""
        if not self.on or self.files is not None:
            return None
        return tls_authority().ca_bundle

    def client_context(self) -> ssl.SSLContext | None:
        """A client TLS context that trusts :meth:`ca_bundle` (None when that is None)."""
        bundle = self.ca_bundle()
        return None if bundle is None else ssl.create_default_context(cafile=bundle)

    def client_certificate(self) -> bytes:
        """A client certificate (PEM: key, then certificate) from the local CA."""
        return tls_authority().client_certificate()

    def context(self) -> ssl.SSLContext | None:
        """The context of ``--tls``: the user's certificate, or one from the local CA."""
        if not self.on:
            return None
        if self.files is not None:
            cert, key = self.files
            from ..transport.tls import own_context

            try:
                return own_context(cert, key)
            except (OSError, ssl.SSLError) as exc:
                raise ServerError(
                    f"cannot use the certificate {cert} with the key {key}: {exc}"
                ) from exc
        return tls_authority().server_context((self.host, *self.names))


def journal_handshake(engine: Engine, failed: Failed) -> None:
    """A handshake that failed on a TLS fault's port, in *engine*'s journal (docs/tls.md): in
    the session the port was allotted to, else the default one."""
    state = engine.state
    skill = next((s for s in engine.scenarios.skills if s.id == failed.skill), None)
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
