"""The request log of a Server started with ``quiet=False``: one line per exchange, secrets masked.

Owns the line's format, which query parameters count as secrets, and
showing the log on stderr when the application configured no logging.
"""

from __future__ import annotations

import logging
import re
import time
from urllib.parse import unquote_plus

from ..engine.plan import Outcome
from ..transport import Refusal
from ..transport import Request as TransportRequest

access_log = logging.getLogger("mockskill.access")
"""The request log (``quiet=False``): one line per exchange, secrets masked."""

SECRET_PARAMETERS = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "client_secret",
        "id_token",
        "password",
        "refresh_token",
        "token",
    }
)
"""Query parameters whose values the request log masks (names compared decoded, in any case)."""
_PARAMETER = re.compile(r"([?&;])([^=&;#\s\"']+)=([^&;#\s\"']*)")


def masked(text: str, token: str | None) -> str:
    """*text* (a request-log line) with the admin *token* and secret query values as ``***``."""
    if token:
        text = text.replace(token, "***")
    return _PARAMETER.sub(_masked_parameter, text)


def _masked_parameter(match: re.Match[str]) -> str:
    separator, name, _ = match.groups()
    if unquote_plus(name).strip().lower() in SECRET_PARAMETERS:
        return f"{separator}{name}=***"
    return match.group(0)


def log_request(exchange: TransportRequest | Refusal, outcome: Outcome, token: str | None) -> None:
    """Log one exchange as a common-log-format line, *token* and secret values masked."""
    method = exchange.method or "-"
    target = exchange.target or "-"
    version = exchange.version if isinstance(exchange, TransportRequest) else "1.1"
    status = outcome.answer.status if outcome.answer is not None else "-"
    peer = exchange.peer[0]
    when = time.strftime("%d/%b/%Y %H:%M:%S")
    line = f'{peer} - - [{when}] "{method} {target} HTTP/{version}" {status} -'
    access_log.info("%s", masked(line, token))


def log_to_stderr() -> None:
    """Show the request log on stderr unless the application configured logging."""
    if not access_log.handlers and not logging.getLogger().handlers:
        access_log.addHandler(logging.StreamHandler())
    if access_log.level == logging.NOTSET:
        access_log.setLevel(logging.INFO)
