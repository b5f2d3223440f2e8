# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one ordering of SGLang (and any Python package) versions: PEP 440, standard library only.

Every caller that orders SGLang versions uses ``version_key`` (the flag table's neighbours in
sglang_args, the readiness path in sglang_server_ready, the baseline fallback in gate_baseline).
Module code on the node cannot import ``packaging``, so this is a small re-statement of PEP 440's
ordering (docs/sglang-versions-and-flags.md, "Version order"): the grammar and the key follow
``packaging.version.Version`` (its regular expression and its ``_cmpkey``), which the unit tests
check on generated versions.

    0.5.12.dev1 < 0.5.12a1 < 0.5.12rc1 < 0.5.12 < 0.5.12+cu128 < 0.5.12.post1 < 0.5.13.dev0 < 0.5.13

``reaches(version, since)`` is the feature test: a feature that ships in ``since`` ships in the
pre-releases and dev builds of ``since`` too (``0.5.23rc1`` reaches ``0.5.23``), as Ansible's
loose ``version`` test counted them before.
"""

from __future__ import annotations

import re

# packaging.version.VERSION_PATTERN (ASCII inside, white space around), matched whole as packaging does.
_VERSION_RE = re.compile(
    r"\s*v?(?a:(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?"
    r"(?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?)"
    r"(?a:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}

VersionKey = tuple


class VersionError(ValueError):
    """A text is not a PEP 440 version; the message names it and the expected shape."""


def version_key(version: object) -> VersionKey | None:
    """A sort key in PEP 440 order for ``version``, or None when it is not a PEP 440 version.

    Keys of equal versions are equal (``1.0`` and ``1.0.0``, ``v0.5.13`` and ``0.5.13``,
    ``0.5.12-1`` and ``0.5.12.post1``); no two parts of keys ever compare a number with a word.
    """
    if not isinstance(version, str):
        return None
    match = _VERSION_RE.fullmatch(version)
    if not match:
        return None
    release = [int(part) for part in match.group("release").split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    has_post = match.group("post_n1") is not None or match.group("post_l") is not None
    has_dev = match.group("dev_l") is not None
    if match.group("pre_l"):
        pre: tuple[int, ...] = (0, _PRE_RANK[match.group("pre_l").lower()], int(match.group("pre_n") or 0))
    elif has_dev and not has_post:
        pre = (-1,)  # 1.0.dev0 sorts before 1.0a0
    else:
        pre = (1,)
    post = (int(match.group("post_n1") or match.group("post_n2") or 0),) if has_post else (-1,)
    dev = (0, int(match.group("dev_n") or 0)) if has_dev else (1,)
    local = tuple(
        (1, int(part)) if part.isdigit() else (0, part.lower())
        for part in re.split(r"[-_.]", match.group("local") or "")
        if part
    )
    return (int(match.group("epoch") or 0), tuple(release), pre, post, dev, local)


def require_key(version: object, what: str = "SGLang version") -> VersionKey:
    """``version_key`` that raises ``VersionError`` (naming ``what`` and the text) instead of None."""
    key = version_key(version)
    if key is None:
        raise VersionError(f"{what} {version!r} is not a PEP 440 version like 0.5.23, 0.5.23rc1 or 0.5.12.post1")
    return key


def public_key(key: VersionKey) -> VersionKey:
    """The key without its local label: ``0.5.23+cu128`` -> the key of ``0.5.23``."""
    return (*key[:-1], ())


def earliest_key(key: VersionKey) -> VersionKey:
    """The key of the first build of ``key``'s release: ``0.5.23`` -> the key of ``0.5.23.dev0``."""
    return (key[0], key[1], (-1,), (-1,), (0, 0), ())


def reaches(version: object, since: str, what: str = "SGLang version") -> bool:
    """True when ``version`` is ``since`` or later, counting the pre-releases and dev builds of ``since``.

    Raises ``VersionError`` for a ``version`` (or ``since``) that is not a PEP 440 version.
    """
    return require_key(version, what) >= earliest_key(require_key(since, "the version to compare with"))
