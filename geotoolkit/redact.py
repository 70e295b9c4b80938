"""The one redaction function: secrets never reach a log, an error, a file or a widget.

Every piece of text that comes from a provider (an error message, a body prefix, a
label) or that names a store (a gate or cache URL, a DSN) passes :func:`redact`
before it is stored, raised, logged or shown. It hides:

- the exact secrets it is given (an API key, a password), also URL-encoded;
- the values of credential parameters, in query strings, ``key=value`` DSNs and
  JSON: ``key``, ``api_key``/``apikey``, ``token``, ``access_token``,
  ``client_secret``, ``password``, ``secret``, ``app_code``, ``auth``, ``signature``;
- the password of a URL's user info (``redis://:pw@host``, ``postgresql://u:pw@db``);
- ``Authorization:`` header values.

Stdlib only: part of the pure core.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

__all__ = ["MASK", "redact"]

#: What a hidden value is replaced with.
MASK = "***"

_NAMES = (r"(?:api[_-]?key|apikey|key|access[_-]?token|token|client[_-]?secret|password|passwd|"
          r"pwd|secret|app[_-]?code|auth|signature|sig)")
# key=value in query strings, form bodies and key=value DSNs ('quoted' values too).
_PARAM = re.compile(
    rf"(?i)(?<![\w.-])({_NAMES})(\s*=\s*)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^&\s'\",;)}}\]]+)")
# "key": "value" in JSON (and Python reprs of dicts).
_JSON = re.compile(rf"(?i)([\"']{_NAMES}[\"']\s*:\s*)([\"'])((?:(?!\2)[^\\]|\\.)*)\2")
# scheme://user:password@host  and  scheme://secret@host (user info without a colon is kept:
# a database user name is not a secret, a bare token in its place is caught by its value).
_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)([^/\s@:]*):([^/\s@]*)@")
_AUTH_HEADER = re.compile(r"(?i)(\b(?:proxy-)?authorization\s*:\s*)(?:(bearer|basic|token)\s+)?\S+")


def _hide_secrets(text: str, secrets: Iterable[str | None]) -> str:
    # Longest first, so a secret that contains another is hidden whole.
    for secret in sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True):
        for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
            text = text.replace(form, MASK)
    return text


def redact(text: object, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret hidden (see the module docstring).

    ``secrets`` are exact values to hide wherever they appear (an API key echoed
    in an error message, a password in a URL). Values shorter than 3 characters
    are not treated as secrets (they would mangle ordinary text). Never raises:
    anything that is not a string is converted with ``str`` first.

    Examples
    --------
    >>> redact("GET https://geo.example/search?q=Vaduz&key=s3cret&limit=1")
    'GET https://geo.example/search?q=Vaduz&key=***&limit=1'
    >>> redact("redis://:hunter2@127.0.0.1:6379/0?password=hunter2")
    'redis://:***@127.0.0.1:6379/0?password=***'
    >>> redact('{"error": "invalid key abc123XYZ", "api_key": "abc123XYZ"}', ["abc123XYZ"])
    '{"error": "invalid key ***", "api_key": "***"}'
    >>> redact("host=db password='hunter 2' dbname=test")
    'host=db password=*** dbname=test'
    """
    if not isinstance(text, str):
        try:
            text = str(text)
        except Exception:  # a broken __str__ must not break error handling
            return f"<{type(text).__name__}>"
    text = _hide_secrets(text, secrets)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", text)
    text = _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _JSON.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}{m.group(2)}", text)
    return _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{(m.group(2) + ' ') if m.group(2) else ''}{MASK}",
                            text)
