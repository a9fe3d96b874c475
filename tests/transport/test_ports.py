"""Where a socket binds: Werkzeug's choice of family and address, without Werkzeug.

transport.ports.address_family and sockaddr are what the listening socket and
the refused port were bound by (werkzeug.serving's select_address_family and
get_sockaddr); they must choose the same.
"""

from __future__ import annotations

import pytest
from werkzeug.serving import get_sockaddr, select_address_family

from mockskill.transport.ports import address_family, sockaddr


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "0.0.0.0", "::1", "::", "unix://./sock"]
)
@pytest.mark.parametrize("port", [0, 8080])
def test_the_address_is_werkzeugs(host: str, port: int) -> None:
    family = address_family(host)
    assert family == select_address_family(host, port)
    assert sockaddr(host, port, family) == get_sockaddr(host, port, family)
