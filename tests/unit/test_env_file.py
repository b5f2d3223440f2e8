# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The unit's EnvironmentFile= texts read back, as systemd reads them, exactly what was given.

``systemd_env_file`` follows the states of ``parse_env_file_internal`` (systemd's
``src/basic/env-file.c``): comments, keys, unquoted, single- and double-quoted values, their
escapes and continuation lines, and the end of the text at the first NUL (systemd walks the file
as a C string). ``legacy_comments`` is the comment rule before systemd 254 (a comment ending in
``\\`` goes on over the next line), which Debian 12's systemd 252 still has.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.filter.sglang_server_env_file import sglang_server_env_file
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_config import (
    ServerConfigError,
    render_env_file,
)

WHITESPACE = " \t\n\r"
NEWLINE = "\n\r"
SHELL_NEED_ESCAPE = '"\\`$'


def systemd_env_file(text: str, *, legacy_comments: bool = False) -> dict[str, str]:  # noqa: PLR0912, PLR0915
    """{key: value} as systemd's EnvironmentFile= parser builds it (a later key replaces an earlier one)."""
    out: dict[str, str] = {}
    state = "PRE_KEY"
    key: list[str] = []
    value: list[str] = []
    last_key_ws: int | None = None
    last_value_ws: int | None = None

    def push(chomp: bool) -> None:
        k = "".join(key[:last_key_ws] if last_key_ws is not None else key)
        v = value[:last_value_ws] if chomp and last_value_ws is not None else value
        out[k] = "".join(v)

    for c in text.split("\x00", 1)[0]:
        if state == "PRE_KEY":
            if c in "#;":
                state = "COMMENT"
            elif c not in WHITESPACE:
                state, key, last_key_ws = "KEY", [c], None
        elif state == "KEY":
            if c in NEWLINE:
                state, key = "PRE_KEY", []
            elif c == "=":
                state, last_value_ws, value = "PRE_VALUE", None, []
            else:
                if c not in WHITESPACE:
                    last_key_ws = None
                elif last_key_ws is None:
                    last_key_ws = len(key)
                key.append(c)
        elif state == "PRE_VALUE":
            if c in NEWLINE:
                push(False)
                state, key, value = "PRE_KEY", [], []
            elif c == "'":
                state = "SINGLE"
            elif c == '"':
                state = "DOUBLE"
            elif c == "\\":
                state = "VALUE_ESCAPE"
            elif c not in WHITESPACE:
                state = "VALUE"
                value.append(c)
        elif state == "VALUE":
            if c in NEWLINE:
                push(True)
                state, key, value = "PRE_KEY", [], []
            elif c == "\\":
                state, last_value_ws = "VALUE_ESCAPE", None
            else:
                if c not in WHITESPACE:
                    last_value_ws = None
                elif last_value_ws is None:
                    last_value_ws = len(value)
                value.append(c)
        elif state == "VALUE_ESCAPE":
            state = "VALUE"
            if c not in NEWLINE:
                value.append(c)
        elif state == "SINGLE":
            if c == "'":
                state = "PRE_VALUE"
            else:
                value.append(c)
        elif state == "DOUBLE":
            if c == '"':
                state = "PRE_VALUE"
            elif c == "\\":
                state = "DOUBLE_ESCAPE"
            else:
                value.append(c)
        elif state == "DOUBLE_ESCAPE":
            state = "DOUBLE"
            if c in SHELL_NEED_ESCAPE:
                value.append(c)
            elif c != "\n":
                value += ["\\", c]
        elif state == "COMMENT":
            if c == "\\":
                state = "COMMENT_ESCAPE"
            elif c in NEWLINE:
                state = "PRE_KEY"
        elif state == "COMMENT_ESCAPE":
            state = "COMMENT" if legacy_comments or c not in NEWLINE else "PRE_KEY"
    if state in ("PRE_VALUE", "VALUE", "VALUE_ESCAPE", "SINGLE", "DOUBLE", "DOUBLE_ESCAPE"):
        push(state == "VALUE")
    return out


def test_the_reference_parser_reads_what_systemd_documents() -> None:
    text = '# c \\\nA=1\n; x\nB = \' two \'\nC="q\\"\\$\\n" tail  \nD=x\\\ny\n'
    assert systemd_env_file(text) == {"A": "1", "B": " two ", "C": 'q"$\\ntail', "D": "xy"}
    assert systemd_env_file(text, legacy_comments=True) == {"B": " two ", "C": 'q"$\\ntail', "D": "xy"}


def test_a_name_with_a_trailing_newline_is_refused() -> None:
    # "^...$" matched "FOO\n": the line became FOO<newline>="v" and systemd dropped the variable
    with pytest.raises(ServerConfigError, match="is not a valid identifier"):
        render_env_file({"FOO\n": "v"})


@pytest.mark.parametrize("header", ["managed \\", "a\nb\\", "a\x00b", "a\rB=evil"])
def test_a_header_that_would_change_what_systemd_reads_is_refused(header: str) -> None:
    with pytest.raises(ServerConfigError, match="header"):
        render_env_file({"A": "1"}, header)
    with pytest.raises(AnsibleFilterError, match="header"):
        sglang_server_env_file({"A": "1"}, header)


def test_backslashes_quotes_dollars_read_back_exactly() -> None:
    env = {"A": "x\\", "B": '"$HOME" `id` \\$ \\\\', "C": " lead and trail ", "D": "#not a comment", "E": "'"}
    text = render_env_file(env, "managed by Ansible")
    assert systemd_env_file(text) == env
    assert systemd_env_file(text, legacy_comments=True) == env


MARK = "S3CR3T"
names = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
    st.text(max_size=6),
    st.sampled_from(["FOO\n", "1A", "A B", "A=B", "", "Ä"]),
)
texts = st.builds(
    lambda a, b: MARK + a + b, st.text(max_size=10), st.sampled_from(["", "\n", "\x00", "\\", '"', "$", "`", "\r", "'"])
)
values = st.one_of(texts, st.integers(), st.floats(), st.booleans(), st.none(), st.lists(st.integers(), max_size=2))
headers = st.one_of(st.just(""), st.text(max_size=12), st.sampled_from(["x\\", "a\nb", "a\x00"]))


@given(st.dictionaries(names, values, max_size=5), headers)
def test_any_environment_reads_back_exactly_or_is_refused_without_its_values(env: dict[str, Any], header: str) -> None:
    try:
        text = render_env_file(env, header)
    except ServerConfigError as exc:
        error = str(exc)
    else:
        error = None
    if error is not None:
        assert MARK not in error
        return
    want = {name: str(value) for name, value in env.items()}
    assert systemd_env_file(text) == want
    assert systemd_env_file(text, legacy_comments=True) == want
    assert "\x00" not in text
