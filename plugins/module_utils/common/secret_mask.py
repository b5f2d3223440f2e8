# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Keeping secrets out of what a module or action plugin returns (stdlib only; runs anywhere).

A secret (an API key, the password or the user information of a URL) can reach a message in many
forms: as it is, quoted by ``repr``, JSON-escaped once or twice (a message quoting a message),
percent-encoded or decoded, with its control characters escaped or split at them. :func:`mask`
replaces every one of those forms, longest first, with :data:`MASK` in every string of a nested
result. Lower-case names (dict keys such as ``passed``, and the values of :data:`ENUM_FIELDS`)
are structure and are left as they are, so that a short key cannot change what a play decides;
any other dict key is text and is masked like a value.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote, unquote, urlsplit

__all__ = [
    "ENUM_FIELDS",
    "MASK",
    "MIN_SECRET_PART",
    "SECRET_FLAGS",
    "mask",
    "mask_url",
    "secret_forms",
    "secrets_of",
]

MASK = "********"
MIN_SECRET_PART = 6  # a piece of a secret split at control characters is masked from this length on

# fields whose values come from a fixed vocabulary: never secrets, and masking a short key inside
# them ("pass") would change what the play decides
ENUM_FIELDS = frozenset({"verdict", "reason"})

# SGLang's server options that carry secrets (without "--"): they come from sglang_server_api_key
# (no_log) only, never from a profile, and whatever shows an argv or options file masks their values.
SECRET_FLAGS = ("api-key", "admin-api-key")

_NAME = re.compile(r"[a-z_]{1,40}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def mask_url(url: str) -> str:
    """``url`` with the password of its user information replaced by :data:`MASK`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, path = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    if not at:
        return url
    user, colon, _password = userinfo.partition(":")
    return f"{scheme}://{user}{':' + MASK if colon else ''}@{hostport}{slash}{path}"


def secrets_of(url: object, api_key: object) -> list[str]:
    """The strings never to show: the API key and the URL's user info (password, user:password)."""
    found: list[str] = []
    if isinstance(api_key, str) and api_key:
        found.append(api_key)
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            password, netloc = parts.password, parts.netloc
        except ValueError:
            password, netloc = None, ""
        if "@" in netloc:
            userinfo = netloc.rsplit("@", 1)[0]
            found.append(userinfo)
            if ":" in userinfo:
                found.append(userinfo.split(":", 1)[1])
        if password:
            found += [password, unquote(password)]
    return list(dict.fromkeys(found))


def _forms(secret: str) -> set[str]:
    forms = {
        secret,
        repr(secret)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        secret.encode("unicode_escape").decode("ascii"),
        secret.encode("utf-8", "replace").decode("latin-1"),
        quote(secret, safe=""),
        quote(secret),
        unquote(secret),
    }
    forms |= {json.dumps(f)[1:-1] for f in list(forms)}  # escaped once more (a message quoting a message)
    forms |= {part for part in _CONTROL.split(secret) if len(part) >= MIN_SECRET_PART}
    return {f for f in forms if f}


def secret_forms(secrets: list[str]) -> list[str]:
    """Every form in which one of ``secrets`` could appear in a message, longest first."""
    return sorted({f for s in secrets if s for f in _forms(s)}, key=lambda f: (-len(f), f))


def _is_name(value: object) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def mask(value: object, secrets: list[str]) -> object:
    """``value`` (str, dict, list, tuple, nested) with every form of every secret replaced by :data:`MASK`.

    Lower-case name keys and :data:`ENUM_FIELDS` values are structure, left as they are; tuples
    come back as lists.
    """
    forms = secret_forms(secrets)
    if not forms:
        return value

    def text(v: str) -> str:
        for f in forms:
            if f in v:
                v = v.replace(f, MASK)
        return v

    def walk(v: object) -> object:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, dict):
            return {
                (k if _is_name(k) else walk(k)): (x if k in ENUM_FIELDS and _is_name(x) else walk(x))
                for k, x in v.items()
            }
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)
