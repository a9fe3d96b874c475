"""The request as the engine reads it: a thin view either server can give.

The event-loop transport hands over a parsed request (method, target,
headers, body bytes); a WSGI server a Werkzeug request. The engine reads
the few things it needs — method, path, headers by name in any case, the
body, where the client reached the server — through :class:`Incoming`,
which costs a dict of the headers to make. A Werkzeug request is built
only where a scenario really needs one (the OAuth2 endpoints' forms and
query strings, the WSGI path's raw socket), and once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, unquote_to_bytes

if TYPE_CHECKING:
    from werkzeug.wrappers import Request

_Source = TypeVar("_Source")
_new = object.__new__


class Incoming:
    """One request: *headers* by lower-case name (repeated ones joined by ``,``, as WSGI
    does), *body* the bytes (or read on first use), *arrived* the time its head was whole.

    *werkzeug* makes the Werkzeug request of it when one is needed.
    """

    __slots__ = (
        "_body",
        "_make",
        "_source",
        "_werkzeug",
        "arrived",
        "head_bytes",
        "headers",
        "method",
        "path",
        "peer",
        "raw_headers",
        "scheme",
        "server",
        "target",
    )

    def __init__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes | None,
        server: tuple[str, int | None],
        arrived: float | None,
        werkzeug: Callable[[], Request],
        scheme: str = "http",
        target: str | None = None,
        raw_headers: tuple[tuple[bytes, bytes], ...] | None = None,
        peer: tuple[str, int] | None = None,
    ) -> None:
        self.method = method
        self.path = path
        """Percent-decoded, as Werkzeug's ``request.path`` reads it."""
        self.target = path if target is None else target
        """The request target as sent: path and query string, not decoded (Latin-1)."""
        self.headers = headers
        if raw_headers is None:
            raw_headers = tuple(
                (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
                for k, v in headers.items()
            )
        self.raw_headers = raw_headers
        """The headers as sent: names as written, in order, repeats kept (bytes as read)."""
        self.head_bytes = sum(len(k) + len(v) for k, v in raw_headers)
        """At least the bytes of :attr:`raw_headers` (the journal cuts them past a bound)."""
        self.scheme = scheme
        self.server = server
        """The address the client connected to (``SERVER_NAME``, ``SERVER_PORT``)."""
        self.arrived = arrived
        self.peer = peer
        """The client's end of the connection (host, port), as read; None: not known."""
        self._body = body
        self._make: Callable[[Any], Request] = _called
        self._source: Any = werkzeug
        self._werkzeug: Request | None = None

    @classmethod
    def of(cls, request: Request) -> Incoming:
        """The view of a Werkzeug request (the WSGI path)."""
        environ = request.environ
        incoming = cls(
            request.method,
            request.path,
            {k.lower(): v for k, v in request.headers.items()},
            None,
            scheme=request.scheme,
            server=(environ.get("SERVER_NAME", "localhost"), _port(environ.get("SERVER_PORT"))),
            arrived=environ.get("mockskill.arrived"),
            werkzeug=lambda: request,
            target=_target_of(environ),
            # WSGI keeps no header's name as written, nor repeats: as Werkzeug names them.
            raw_headers=tuple(
                (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
                for k, v in request.headers.items()
            ),
            peer=_peer(environ),
        )
        incoming._werkzeug = request
        return incoming

    def client_address(self) -> str | None:
        """The client's address: as the server read it, else as the Werkzeug request says."""
        peer = self.peer
        return self.werkzeug().remote_addr if peer is None else peer[0]

    def header(self, name: str) -> str | None:
        """The value of header *name* (any case), or None."""
        return self.headers.get(name.lower())

    def arguments(self) -> Mapping[str, list[str]]:
        """The query string's parameters, each with its values in order (as Werkzeug reads
        them: a case's ``query:`` condition)."""
        args = self.werkzeug().args
        return {key: args.getlist(key) for key in args}

    @property
    def body(self) -> bytes:
        """The body's bytes (read, and kept, on first use when the server did not)."""
        body = self._body
        if body is None:
            body = self._body = self.werkzeug().get_data(cache=True)
        return body

    def werkzeug(self) -> Request:
        """The Werkzeug request, made on first use: for what reads forms or a raw socket."""
        made = self._werkzeug
        if made is None:
            made = self._werkzeug = self._make(self._source)
        return made


def viewed(
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    server: tuple[str, int | None],
    arrived: float,
    make: Callable[[_Source], Request],
    source: _Source,
    target: str,
    raw_headers: tuple[tuple[bytes, bytes], ...],
    head_bytes: int,
    peer: tuple[str, int],
) -> Incoming:
    """The view of a request another server read (the event loop's), made for every one of
    its requests: :class:`Incoming`'s slots set here, without its ``__init__`` (a call
    through the type, and a closure to make the Werkzeug request, cost more than the rest);
    ``make(source)`` makes the Werkzeug request when one is needed."""
    view: Incoming = _new(Incoming)
    view.method, view.path, view.headers, view.scheme = method, path, headers, "http"
    view.target, view.raw_headers, view.head_bytes = target, raw_headers, head_bytes
    view.server, view.arrived, view._body, view._werkzeug = server, arrived, body, None
    view._make, view._source, view.peer = make, source, peer
    return view


def _called(make: Callable[[], Request]) -> Request:
    return make()


def headers_of_raw(pairs: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Headers as read (Latin-1 bytes) by lower-case name; a repeated one's values joined by
    ``,`` (as in WSGI). Decoded once, into the dict."""
    if not isinstance(pairs, (tuple, list)):
        pairs = tuple(pairs)
    # One pass for the common case, every name once (a loop: in 3.11 a comprehension is a
    # function call of its own); a repeated name shows as fewer keys than pairs, and only
    # then are the values joined pair by pair. The names as sent are looked up in _NAMES:
    # a client sends the same few on every request, lowered and decoded once.
    headers = {}
    names = _NAMES
    for name, raw in pairs:
        key = names.get(name)
        if key is None:
            key = _name(name)
        headers[key] = raw.decode("latin-1")
    if len(headers) == len(pairs):
        return headers
    headers = {}
    for name, raw in pairs:
        key, value = name.lower().decode("latin-1"), raw.decode("latin-1")
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    return headers


_NAMES: dict[bytes, str] = {}
"""Header names as read -> as :attr:`Incoming.headers` names them (lowered, decoded)."""
MAX_NAMES = 256
"""Names :data:`_NAMES` keeps; beyond, it starts afresh (a client inventing names cannot
grow memory)."""


def _name(name: bytes) -> str:
    """*name* lowered and decoded, kept in :data:`_NAMES` for the next request."""
    if len(_NAMES) >= MAX_NAMES:
        _NAMES.clear()  # atomic, unlike evicting one: WSGI requests run on threads
    key = _NAMES[name] = name.lower().decode("latin-1")
    return key


def decoded_path(target: str) -> str:
    """The path of a request *target* as Werkzeug reads it: percent-decoded (UTF-8, bad
    bytes replaced) from PEP 3333's Latin-1 ``PATH_INFO``, with one leading slash."""
    path = target.partition("?")[0]
    if "%" in path or not path.isascii():
        path = unquote_to_bytes(path).decode("utf-8", "replace")
    elif path[:1] == "/" and path[1:2] != "/":
        return path  # one leading slash already: most paths
    return "/" + path.lstrip("/")


def _target_of(environ: Mapping[str, Any]) -> str:
    """The request target a WSGI server read: as sent where it says it (``RAW_URI``,
    ``REQUEST_URI``), else made again of the path and query string."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if isinstance(raw, str) and raw:
        return raw
    path = quote(
        environ.get("PATH_INFO", "").encode("latin-1", "replace") or b"/", safe="/;=,:@!$&'()*+~"
    )
    query = environ.get("QUERY_STRING", "")
    return f"{path}?{query}" if query else path


def _port(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _peer(environ: Mapping[str, Any]) -> tuple[str, int] | None:
    """The client's end of the connection a WSGI server names (``REMOTE_ADDR``,
    ``REMOTE_PORT``); None when it names no address."""
    address = environ.get("REMOTE_ADDR")
    if not address:
        return None
    return (str(address), _port(environ.get("REMOTE_PORT")) or 0)
