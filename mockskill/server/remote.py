"""A handle on a mockskill server that is already running elsewhere, through its admin API.

:class:`RemoteServer` has the part of :class:`~mockskill.server.server.Server`'s
interface that a test session needs (its URLs, one session's journal and
requests, verify, reset and retry audit), done over HTTP with ``/__admin`` (docs/admin.md), so that
the pytest plugin can share one server between xdist workers, suites or a
container. Only the standard library is used: a consumer's test run needs
no HTTP client of mockskill's choosing.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..engine.state import Entry

if TYPE_CHECKING:
    from .. import audit


# HOST:PORT, [v6]:PORT or localhost, then a path, a query or nothing: what curl
# takes as an http URL without a scheme. (A scheme-less word alone could be a
# file's name, so without a port only localhost counts.)
_SCHEMELESS = re.compile(
    r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d+(?=[/?#]|$)"  # HOST:PORT
    r"|^localhost(?=[/?#]|$)"
)


def looks_like_url(text: str) -> bool:
    """Whether *text* is an http(s) URL, or a scheme-less ``HOST:PORT/...`` curl would fetch."""
    return text.startswith(("http://", "https://")) or bool(_SCHEMELESS.match(text))


def http_url(text: str) -> str:
    """*text* as an http(s) URL: a scheme-less ``HOST:PORT/...`` gets ``http://``, as in curl.

    Raises ValueError, saying what is accepted, for another scheme or no host.
    """
    url = text if "://" in text else f"http://{text}"
    parsed = urllib.parse.urlsplit(url)
    try:
        port_ok = parsed.port is None or parsed.port > 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    if parsed.scheme not in ("http", "https") or not parsed.hostname or not port_ok:
        raise ValueError(
            f"expected an http(s) URL (http://HOST[:PORT][/PATH], or HOST:PORT/PATH as curl"
            f" takes it), found {text!r}"
        )
    return url


class RemoteError(Exception):
    """The remote server could not be asked: unreachable, refused, or not mockskill."""

    def __init__(
        self, message: str, *, status: int | None = None, token_given: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status of a refusal (401: the admin token is missing or wrong)."""
        self.token_given = token_given
        """Whether an admin token was sent (a 401 then refused it: it is wrong)."""

    @property
    def token_refused(self) -> bool:
        """A 401 to a token given: the token is not the server's (not: none was given)."""
        return self.status == 401 and self.token_given


class RemoteServer:
    """The mockskill server at *url* (its base URL), asked through ``/__admin``.

    *admin_token* is sent with every admin request (as
    ``Authorization: Bearer``) when the server asks for one. Every failure
    raises :class:`RemoteError` naming the address and what went wrong.
    """

    def __init__(self, url: str, *, admin_token: str | None = None, timeout: float = 30) -> None:
        try:
            url = http_url(url)
        except ValueError as exc:
            raise RemoteError(f"the mockskill URL: {exc}") from None
        self._url = url.rstrip("/")
        self._admin_token = admin_token or None
        self.timeout = timeout

    @property
    def url(self) -> str:
        """The base URL, as given (no trailing slash; ``http://`` added to a scheme-less one)."""
        return self._url

    def skill_url(self, skill_id: str) -> str:
        return f"{self._url}/skills/{skill_id}"

    def invoke_url(self, skill_id: str) -> str:
        return f"{self._url}/skills/{skill_id}/invoke"

    def health(self) -> dict[str, Any]:
        """``GET /__admin/health``: what the server serves (raises RemoteError if it cannot)."""
        return self.admin("GET", "health")

    def journal(self, session: str | None = None) -> list[Entry]:
        """The requests answered, oldest first; all of them, or one session's."""
        query = [] if session is None else [("session", session)]
        body = self.admin("GET", "journal", query)
        try:
            return [Entry.from_json(e) for e in body["entries"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RemoteError(f"{self._url}/__admin/journal answered no journal: {exc}") from None

    def reset(self, session: str | None = None) -> None:
        """Forget positions, random draws and journal: all of them, or one session's."""
        # Everything is asked for by name: a bare reset is refused (docs/admin.md).
        self.admin(
            "POST", "reset", [("all", "true")] if session is None else [("session", session)]
        )

    def report(
        self, session: str | None = None, policy: audit.Policy | None = None
    ) -> dict[str, Any]:
        """The retry audit and category coverage (``GET /__admin/report``), as on Server."""
        query = [] if session is None else [("session", session)]
        if policy is not None:
            query += [(k, repr(v)) for k, v in policy.as_json().items()]
        return self.admin("GET", "report", query)

    def requests(
        self,
        session: str | None = None,
        *,
        skill: str | None = None,
        method: str | None = None,
        path: str | None = None,
        limit: int | None = None,
    ) -> list[Entry]:
        """``GET /__admin/requests``: the requests the journal holds, as on Server."""
        given = {"session": session, "skill": skill, "method": method, "path": path}
        query = [(k, v) for k, v in given.items() if v is not None]
        if limit is not None:
            query.append(("limit", str(limit)))
        body = self.admin("GET", "requests", query)
        try:
            return [Entry.from_json(e) for e in body["requests"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RemoteError(f"{self._url}/__admin/requests answered no requests: {exc}") from None

    def verify(
        self,
        when: Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        skill: str | None = None,
        method: str | None = None,
        path: str | None = None,
        count: int | None = None,
        at_least: int | None = None,
        at_most: int | None = None,
    ) -> list[Entry]:
        """``POST /__admin/verify``, as Server's :meth:`~mockskill.Server.verify`: the matching
        entries the server answers (its newest 20), or AssertionError with its near misses."""
        __tracebackhide__ = True  # (pytest) a failure points at the caller's line
        from ..engine.verifying import message
        from ..scenario.verification import document, verification_of

        asked = document(
            when,
            session=session,
            skill=skill,
            method=method,
            path=path,
            count=count,
            at_least=at_least,
            at_most=at_most,
        )
        verification_of(asked)  # a bad condition is the same BadVerification as on Server
        status, body = self.ask("POST", "verify", body=asked, answered=(409,))
        try:
            if status == 409:
                said = message(body["error"]["details"])
            else:
                return [Entry.from_json(e) for e in body["entries"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            said = f"{self._url}/__admin/verify answered no verification: {exc}"
            raise RemoteError(said) from None
        raise AssertionError(said)

    def verdict(
        self,
        session: str,
        require: str | Iterable[str] = (),
        policy: audit.Policy | None = None,
    ) -> dict[str, Any]:
        """``GET /__admin/verdict``: *session*'s verdict, as on Server (the 409's RFC 9457
        members left out); LookupError for a session the journal has no request of."""
        from .. import audit

        required = audit.required_names([require] if isinstance(require, str) else require)
        query = [("session", session), *(("require", name) for name in required)]
        if policy is not None:
            query += [(k, repr(v)) for k, v in policy.as_json().items()]
        status, body = self.ask("GET", "verdict", query, answered=(404, 409))
        if status == 404:
            raise LookupError(str(body.get("detail", body)))
        for member in ("type", "title", "status", "instance"):
            body.pop(member, None)
        return body

    def admin(
        self, method: str, endpoint: str, query: list[tuple[str, str]] | None = None
    ) -> dict[str, Any]:
        """``METHOD /__admin/ENDPOINT?QUERY``: its JSON object, or RemoteError saying why not."""
        return self.ask(method, endpoint, query)[1]

    def ask(
        self,
        method: str,
        endpoint: str,
        query: list[tuple[str, str]] | None = None,
        *,
        body: Any = None,
        answered: tuple[int, ...] = (),
    ) -> tuple[int, dict[str, Any]]:
        """``METHOD /__admin/ENDPOINT?QUERY`` with *body* (sent as JSON, unless None): the
        status and JSON object of a success or of a status in *answered*; RemoteError else."""
        address = f"{self._url}/__admin/{endpoint}"
        if query:
            address += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json"}
        if self._admin_token is not None:
            headers["Authorization"] = f"Bearer {self._admin_token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(address, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status, document = response.status, json.load(response)
        except urllib.error.HTTPError as exc:
            given = self._admin_token is not None
            if exc.code in answered:
                try:
                    status, document = exc.code, json.load(exc)
                except ValueError as bad:
                    raise RemoteError(f"{address} did not answer JSON: {bad}") from None
                if not isinstance(document, dict):
                    raise RemoteError(f"{address} answered {type(document).__name__}") from None
                return status, document
            if exc.code == 401:  # said by what was sent: the server's sentence fits neither
                exc.close()  # (its body unread)
                said = (
                    "the server refused the admin token given (not its token)"
                    if given
                    else "the server asks for its admin token, and none was given"
                )
            else:
                said = _error_message(exc)
            raise RemoteError(
                f"{method} {address} answered {exc.code}: {said}",
                status=exc.code,
                token_given=given,
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RemoteError(f"cannot reach {address}: {reason}") from None
        except ValueError as exc:
            raise RemoteError(f"{address} did not answer JSON: {exc}") from None
        if not isinstance(document, dict):
            raise RemoteError(f"{address} answered {type(document).__name__}, not a JSON object")
        return status, document

    def __repr__(self) -> str:
        return f"<RemoteServer {self._url}>"


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.load(exc)
        # The unified error body, or an RFC 9457 problem's (the verdict's)
        return str(body["error"]["message"] if "error" in body else body["detail"])
    except (ValueError, KeyError, TypeError):
        return str(exc.reason)
