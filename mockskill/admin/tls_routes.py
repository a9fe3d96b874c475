"""``/__admin/tls``: the CA certificate a consumer trusts, and client certificates it may use.

``GET /__admin/tls/ca.pem`` is the certificate (PEM) of the server's local CA:
it signs the ``--tls`` certificate (unless the user gave their own), the
certificates of the TLS faults' ports, and the client certificates that
``POST /__admin/tls/client-cert`` issues (private key and certificate, PEM),
which a ``tls: client_cert_required`` skill accepts (docs/tls.md).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from ..engine.engine import Engine
from ..protocol.catalog import unified_body

PEM_TYPE = "application/x-pem-file"


def register(bp: Blueprint, engine: Engine) -> None:
    @bp.get("/tls/ca.pem")
    def ca_pem() -> Response:
        """The local CA's certificate (PEM)."""
        if engine.tls is None:
            return _no_tls()
        return Response(engine.tls.ca_pem, content_type=PEM_TYPE)

    @bp.post("/tls/client-cert")
    def client_cert() -> Response:
        """A new client certificate from the local CA (PEM: private key, then certificate)."""
        if engine.tls is None:
            return _no_tls()
        return Response(engine.tls.client_certificate(), content_type=PEM_TYPE)


def _no_tls() -> Response:
    body = unified_body(
        "MOCKSKILL_HTTP_404", "this server holds no certificates (it is not mockskill.Server)"
    )
    response = jsonify(body)
    response.status_code = 404
    return response


def is_public(path: str, method: str) -> bool:
    """Whether *path* (below the admin prefix) is the CA certificate, asked for with GET or HEAD.

    It is served without the admin token: a certificate is public (its key
    never leaves the server), and a client that must trust it fetches it
    before it has anything else to do with the server (docs/tls.md).
    """
    return method in ("GET", "HEAD") and path == "/tls/ca.pem"
