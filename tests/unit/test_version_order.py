# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one SGLang version ordering (module_utils/common/version_order.py) and the callers that use it.

Before it there were three: sglang_args' own regular expression (refused 0.5.23a1, 0.5.23rc1.dev1,
v0.5.23 and 0.5.23+cu128), gate_baseline's PEP 440 key, and Ansible's LooseVersion in
sglang_server_ready (which put 0.5.23rc1 after 0.5.23.post1, and could not compare v0.5.23 or
0.5rc1 with 0.5.23). The named cases below are where they disagreed; the properties check the
key against packaging.version (a dependency of ansible-core, so always in the test venv) on
generated versions.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import InvalidVersion, Version

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import version_order as vo
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import (
    SGLangArgsError,
    known_flags,
    parse_version,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_ready import ready_path

# --------------------------------------------------------------------------- the order itself


def test_pep440_order():
    order = ["0.5.9", "0.5.10", "0.5.12.dev1", "0.5.12a1", "0.5.12rc1", "0.5.12", "0.5.12.post1", "0.5.13", "1!0.1"]
    keys = [vo.version_key(v) for v in order]
    assert all(k is not None for k in keys)
    assert keys == sorted(keys)
    assert [order[i] for i in sorted(range(len(order)), key=lambda i: keys[i])] == order
    assert vo.version_key("1.0") == vo.version_key("1.0.0")
    assert vo.version_key("v0.5.13") == vo.version_key("0.5.13")
    assert vo.version_key("0.5.13+cu128") > vo.version_key("0.5.13")
    assert vo.version_key("unknown") is None
    assert vo.version_key("") is None


# (lower, higher): pairs the old orderings got wrong or could not order
DISAGREED = [
    ("0.5.23rc1", "0.5.23"),  # LooseVersion: rc1 after the release
    ("0.5.23rc1", "0.5.23.post1"),  # LooseVersion: 'rc' > 'post'
    ("0.5.23.dev0", "0.5.23a1"),  # sglang_args: no alpha
    ("0.5.23a1", "0.5.23rc1"),
    ("0.5.23rc1.dev1", "0.5.23rc1"),  # sglang_args: no dev build of a pre-release
    ("0.5.23", "0.5.23+cu128"),  # sglang_args: no local label
    ("0.5.23+cu128", "0.5.23.post1"),
    ("0.5rc1", "0.5.23"),  # LooseVersion: TypeError ('rc' against 23)
    ("0.5.22", "v0.5.23"),  # LooseVersion: TypeError ('v' against 0)
]


@pytest.mark.parametrize(("lower", "higher"), DISAGREED)
def test_the_cases_the_old_orderings_disagreed_on(lower, higher):
    assert vo.version_key(lower) < vo.version_key(higher)
    assert Version(lower) < Version(higher)


def test_reaches_counts_the_pre_releases_of_the_release():
    assert vo.reaches("0.5.23rc1", "0.5.23")
    assert vo.reaches("0.5.23.dev0", "0.5.23")
    assert vo.reaches("0.5.23", "0.5.23")
    assert vo.reaches("0.5.24a1", "0.5.23")
    assert not vo.reaches("0.5.22.post9", "0.5.23")
    assert not vo.reaches("0.5.22+cu128", "0.5.23")


def test_require_key_names_the_text_and_the_shape():
    with pytest.raises(vo.VersionError, match=r"SGLang version 'main' is not a PEP 440 version like 0\.5\.23"):
        vo.require_key("main")
    with pytest.raises(vo.VersionError, match="the version to compare with 'x'"):
        vo.reaches("0.5.23", "x")


# --------------------------------------------------------------------------- the callers


def test_known_flags_of_a_dev_build_of_a_release_candidate():
    """0.5.23rc1.dev1 lies between the dumped 0.5.22 and 0.5.23, like 0.5.23rc1 (refused before)."""
    assert known_flags("0.5.23rc1.dev1") == known_flags("0.5.23rc1")
    assert known_flags("0.5.23rc1") != known_flags("0.5.23")


def test_known_flags_of_an_alpha():
    assert known_flags("0.5.23a1") == known_flags("0.5.23rc1")


def test_known_flags_of_a_local_build_are_its_public_versions():
    """0.5.19+cu128 has the parser of 0.5.19, not the intersection of 0.5.19 and 0.5.20."""
    assert known_flags("0.5.23+cu128") == known_flags("0.5.23")
    assert known_flags("0.5.19+cu128") == known_flags("0.5.19")
    assert known_flags("0.5.19+cu128") != known_flags("0.5.19.post1")


def test_known_flags_with_a_v_prefix():
    assert known_flags("v0.5.23") == known_flags("0.5.23")


@pytest.mark.parametrize("version", ["0.5.23-1", "0.5.23.1", "0.5", "0.5.23rc1 extra"])
def test_sglang_args_keeps_refusing_what_is_not_an_sglang_release(version):
    with pytest.raises(SGLangArgsError, match="is not a release version"):
        parse_version(version)


@pytest.mark.parametrize(
    ("version", "path"),
    [
        ("v0.5.23", "/ready"),  # LooseVersion raised
        ("0.5rc1", "/health_generate"),  # LooseVersion raised
        ("0.5.23.dev0", "/ready"),
        ("0.5.22.post1+cu128", "/health_generate"),
    ],
)
def test_ready_path_orders_what_loose_ordering_could_not(version, path):
    assert ready_path(version) == path


def test_ready_path_names_a_version_that_is_not_pep440():
    with pytest.raises(ValueError, match=r"SGLang version '0\.5\.23-custom' cannot be compared with 0\.5\.23"):
        ready_path("0.5.23-custom")


# --------------------------------------------------------------------------- properties

_SEP = st.sampled_from(["", ".", "-", "_"])
_NUM = st.integers(min_value=0, max_value=30).map(str) | st.sampled_from(["00", "007", "12345678901234567890"])


@st.composite
def pep440_texts(draw) -> str:
    """A version text in any of PEP 440's accepted spellings (case, separators, implicit numbers)."""
    text = draw(st.sampled_from(["", "v", "V"]))
    if draw(st.booleans()):
        text += draw(_NUM) + "!"
    text += ".".join(draw(st.lists(_NUM, min_size=1, max_size=4)))
    if draw(st.booleans()):
        letter = draw(st.sampled_from(["a", "alpha", "b", "beta", "c", "rc", "pre", "preview", "RC", "Alpha"]))
        text += draw(_SEP) + letter + (draw(_SEP) + draw(_NUM) if draw(st.booleans()) else "")
    post = draw(st.integers(min_value=0, max_value=2))
    if post == 1:
        text += "-" + draw(_NUM)
    elif post == 2:
        letter = draw(st.sampled_from(["post", "rev", "r", "POST"]))
        text += draw(_SEP) + letter + (draw(_SEP) + draw(_NUM) if draw(st.booleans()) else "")
    if draw(st.booleans()):
        letter = draw(st.sampled_from(["dev", "DEV"]))
        text += draw(_SEP) + letter + (draw(_SEP) + draw(_NUM) if draw(st.booleans()) else "")
    if draw(st.booleans()):
        parts = draw(st.lists(st.from_regex(r"[a-zA-Z0-9]{1,6}", fullmatch=True), min_size=1, max_size=3))
        text += "+" + draw(_SEP.filter(bool)).join(parts)
    return draw(st.sampled_from(["", " ", "\n"])) + text + draw(st.sampled_from(["", " ", "\t\n"]))


def _sign(a, b) -> int:
    return (a > b) - (a < b)


@given(pep440_texts())
def test_every_pep440_spelling_has_a_key(text):
    assert vo.version_key(text) is not None
    Version(text)  # packaging agrees it is a version


@given(pep440_texts(), pep440_texts())
def test_order_is_total_and_agrees_with_packaging(first, second):
    a, b = vo.version_key(first), vo.version_key(second)
    # total: exactly one of <, ==, > (and no comparison of a number with a word raises)
    assert [a < b, a == b, a > b].count(True) == 1
    assert _sign(a, b) == _sign(Version(first), Version(second))
    assert (a == b) == (hash(Version(first)) == hash(Version(second)) and Version(first) == Version(second))


@given(st.lists(pep440_texts(), min_size=3, max_size=6))
def test_sorting_by_key_is_sorting_by_packaging(texts):
    by_key = sorted(texts, key=vo.version_key)
    assert [Version(t) for t in by_key] == sorted(Version(t) for t in texts)


_NEAR_VERSIONS = st.from_regex(r"v?[0-9.!+a-z_-]{0,16}", fullmatch=True)


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=24) | _NEAR_VERSIONS)
def test_any_text_is_a_version_exactly_when_packaging_says_so(text):
    key = vo.version_key(text)
    try:
        Version(text)
    except InvalidVersion:
        assert key is None
    else:
        assert key is not None


def _outcome(function, text: str) -> object:
    """What ``function(text)`` returns, or the ValueError it raises (any other exception propagates)."""
    try:
        return function(text)
    except ValueError as exc:
        return exc


@given(st.text(max_size=24) | pep440_texts())
def test_sglang_args_parse_version_is_the_shared_key_or_a_named_error(text):
    result = _outcome(parse_version, text)
    if isinstance(result, ValueError):
        assert isinstance(result, SGLangArgsError)
        assert "is not a release version" in str(result)
    else:
        assert result == vo.version_key(text)


@given(st.text(max_size=24) | pep440_texts())
def test_ready_path_is_a_path_or_a_named_error(text):
    result = _outcome(ready_path, text)
    if isinstance(result, ValueError):
        assert "cannot be compared with 0.5.23" in str(result)
        assert vo.version_key(text) is None
    else:
        assert result == ("/ready" if vo.reaches(text, "0.5.23") else "/health_generate")
