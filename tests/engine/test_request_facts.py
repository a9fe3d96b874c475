"""The base URL a client reached the server by: Werkzeug's reading of the Host, kept.

request_facts.get_host is Werkzeug's ``get_host`` (3.1.8 and later) written
out, so that the engine does not import Werkzeug; it must read every Host
header, and every server address, as that one does.
"""

from __future__ import annotations

import pytest
from werkzeug.sansio.utils import get_host as werkzeugs

from mockskill.engine.request_facts import get_host

HOSTS = [
    None,
    "example.com",
    "example.com:80",
    "example.com:443",
    "example.com:8080",
    "EXAMPLE.com:0",
    "example.com:65536",
    "127.0.0.1:5000",
    "[::1]:5000",
    "[::1]",
    "evil.com/path",
    "a b",
    "",
    "host:port",
    "xn--bcher-kva.example",
    "bücher.example",
    "example.com:01",
]


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("server", [("127.0.0.1", 80), ("::1", 8443), ("/run/sock", None)])
def test_the_host_is_read_as_werkzeug_read_it(
    scheme: str, host: str | None, server: tuple[str, int | None]
) -> None:
    assert get_host(scheme, host, server) == werkzeugs(scheme, host, server)
