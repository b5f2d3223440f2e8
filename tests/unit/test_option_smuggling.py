# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""No value of a profile, a tuned profile or extra args becomes an SGLang option.

SGLang 0.5.23 reads the options file with ``--config`` by turning each ``key: value`` into
``--key value`` (``sglang/srt/utils/server_args_config_parser.py``) and handing the words to its
argparse parser (``ArgumentParser(prog="sglang serve")``: prefix matching on, ``-h`` defined).
A value such as ``--admin-api-key=x`` after a flag whose value is optional, or a list item
``--api-key``, is then that option. ``expand_like_sglang`` and ``flag_table_parser`` below model
those two steps with the release's own flag table, and every property asks: are the options the
parser sees exactly the keys we wrote?
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st
from standins import sglang_api

from ansible_collections.gpufleet.sglang.plugins.filter.sglang_server_args import sglang_server_args
from ansible_collections.gpufleet.sglang.plugins.filter.sglang_server_config import sglang_server_config
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import (
    SGLangArgsError,
    check_profile,
    known_flags,
    normalize,
    option_in_value,
    render_argv,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.flag_table import FLAGS
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_config import (
    ServerConfigError,
    config_from_argv,
    render_config,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.tune.profile import (
    TunedProfileError,
    find_tuned,
    write_tuned,
)

VERSION = "0.5.23"
KINDS = known_flags(VERSION)
KEY = {
    "host": "n1",
    "profile": "glm5_nvfp4_tp8",
    "sglang_version": VERSION,
    "model": "m",
    "model_revision": "unpinned",
    "gpu_model": "RTX PRO 6000",
}
SECRET = "s3cr3t-k3y"


class Refused(Exception):
    """argparse's error() (the real parser would exit 2)."""


class Seen(argparse.Action):
    """Records every option string the parser matched, in order."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.seen.append(self.dest)
        setattr(namespace, "value:" + self.dest, values)


class FlagTableParser(argparse.ArgumentParser):
    def error(self, message):
        raise Refused(message)


def flag_table_parser(kinds: dict[str, str]) -> FlagTableParser:
    """argparse with the release's flags (kinds from the table) and -h, as SGLang builds it (prefixes on)."""
    parser = FlagTableParser(add_help=False)
    parser.add_argument("-h", action=Seen, nargs=0, dest="-h")
    for flag, kind in kinds.items():
        nargs = {"bool": 0, "value": None, "optional": "?", "list": "+"}[kind]
        extra = {"const": True} if kind == "optional" else {}
        parser.add_argument(flag, action=Seen, nargs=nargs, dest=flag, **extra)
    return parser


PARSER = flag_table_parser(KINDS)
ALL_FLAGS_PARSER = flag_table_parser({flag: kind for flag, (kind, _presence) in FLAGS.items()})


def expand_like_sglang(config: dict[str, Any], kinds: dict[str, str]) -> list[str]:
    """What SGLang 0.5.23's ConfigArgumentMerger._convert_config_to_args makes of the file (the stand-in's
    reading of it, with the release's flag kinds)."""
    return sglang_api.config_argv(config, kinds)


def parse(words: list[str]) -> argparse.Namespace:
    namespace = argparse.Namespace(seen=[])
    PARSER.parse_args(words, namespace)
    return namespace


# ---- named cases (each one passed the filters before this change) ----

SMUGGLED = [
    pytest.param({"model_checksum": "--admin-api-key=" + SECRET}, "--admin-api-key", id="optional-flag-equals"),
    pytest.param({"served_model_name": "--api-key=" + SECRET}, "--api-key", id="value-flag-equals"),
    pytest.param({"allowed_media_domains": ["a.example", "--admin-api-key", SECRET]}, "--admin-api-key", id="list"),
    pytest.param(
        {"model_checksum": "--admin-api=" + SECRET},
        "completes it to the SGLang option --admin-api-key",
        id="abbreviation",
    ),
    pytest.param({"model_checksum": "-h"}, "help option", id="short-help"),
    pytest.param({"allowed_media_domains": ["-hx"]}, "help option", id="short-help-joined"),
    pytest.param({"model_checksum": "  --api-key=" + SECRET}, "blanks", id="leading-blanks"),
    pytest.param({"model_checksum": "\u2014api-key=" + SECRET}, "U+2014", id="em-dash"),
    pytest.param({"model_checksum": "\u2212\u2212api-key=" + SECRET}, "U+2212", id="minus-sign"),
    pytest.param({"served_model_name": "-x"}, "starting with '-'", id="any-dash"),
    pytest.param({"served_model_name": "--api-key " + SECRET}, "starting with '-'", id="blank-joined"),
    pytest.param({"random_seed": -1e-05}, "plain negative numbers", id="negative-exponent"),
]


@pytest.mark.parametrize(("profile", "why"), SMUGGLED)
def test_a_value_that_reads_as_an_option_is_refused_by_name(profile: dict[str, Any], why: str) -> None:
    with pytest.raises(SGLangArgsError) as caught:
        render_argv({"model_path": "/m", **profile}, VERSION)
    message = str(caught.value)
    (key,) = profile
    assert repr(key) in message
    assert why in message
    assert SECRET not in message


@pytest.mark.parametrize(("profile", "why"), SMUGGLED)
def test_the_filters_refuse_it_too(profile: dict[str, Any], why: str) -> None:
    with pytest.raises(AnsibleFilterError, match="looks like an option"):
        sglang_server_args({"model_path": "/m", **profile}, VERSION)


def test_the_options_file_refuses_a_smuggled_word_in_a_raw_argv() -> None:
    for argv in (
        ["--model-path", "/m", "--model-checksum", "--admin-api-key=" + SECRET],
        ["--model-path", "/m", "--allowed-media-domains", "a", "--api=" + SECRET],
        ["--model-path", "-h"],
        ["--model-path", "/m", "--served-model-name", "--api-key " + SECRET],
    ):
        with pytest.raises(ServerConfigError, match="looks like an option") as caught:
            render_config(argv, VERSION)
        assert SECRET not in str(caught.value)
        with pytest.raises(AnsibleFilterError, match="looks like an option"):
            sglang_server_config(argv, VERSION)


def test_negative_numbers_and_inner_dashes_are_values() -> None:
    argv = render_argv(
        {"model_path": "/m", "random_seed": -1, "served_model_name": "glm-5--nvfp4", "mem_fraction_static": -0.5},
        VERSION,
    )
    assert argv == [
        "--model-path", "/m", "--random-seed", "-1", "--served-model-name", "glm-5--nvfp4",
        "--mem-fraction-static", "-0.5",
    ]  # fmt: skip
    config = json.loads(render_config(argv, VERSION))
    assert parse(expand_like_sglang(config, KINDS)).seen == ["--" + k for k in config]


@pytest.mark.parametrize("key", ["api_key", "admin_api_key", "--api-key", "config"])
def test_secret_and_reserved_keys_are_refused_before_any_argv_exists(key: str) -> None:
    # the argv is a fact and shows in -v output: a key must be refused before it is rendered
    with pytest.raises(SGLangArgsError, match=f"key '{key}' sets") as caught:
        render_argv({"model_path": "/m", key: SECRET}, VERSION)
    assert SECRET not in str(caught.value)


def test_null_removes_a_secret_key_as_before() -> None:
    assert render_argv({"model_path": "/m", "api_key": None}, VERSION) == ["--model-path", "/m"]


def test_an_unknown_word_in_a_raw_argv_is_named_without_what_follows() -> None:
    with pytest.raises(ServerConfigError, match="is not a flag this version knows") as caught:
        render_config(["--api-key=" + SECRET], VERSION)
    assert SECRET not in str(caught.value)


def test_the_config_flag_in_a_raw_argv_is_refused() -> None:
    with pytest.raises(ServerConfigError, match="--config is set by role sglang_server"):
        render_config(["--model-path", "/m", "--config", "/tmp/other.yaml"], VERSION)


def _tuned_file(tmp_path: Path, flags: Any) -> Path:
    path = tmp_path / "n1.tuned.json"
    path.write_text(json.dumps({"key": KEY, "flags": flags, "found": {}}))
    return path


def test_a_tuned_profile_with_a_smuggled_value_is_refused_naming_file_and_key(tmp_path: Path) -> None:
    path = _tuned_file(tmp_path, {"model_checksum": "--admin-api-key=" + SECRET})
    with pytest.raises(TunedProfileError) as caught:
        find_tuned(str(tmp_path), {"host": "n1"})
    message = str(caught.value)
    assert str(path) in message
    assert "'model_checksum'" in message
    assert "--admin-api-key" in message
    assert SECRET not in message


def test_a_tuned_profile_with_a_secret_key_is_refused(tmp_path: Path) -> None:
    _tuned_file(tmp_path, {"api_key": SECRET})
    with pytest.raises(TunedProfileError, match="sets --api-key") as caught:
        find_tuned(str(tmp_path), {"host": "n1"})
    assert SECRET not in str(caught.value)


def test_a_smuggled_tuned_profile_is_never_written(tmp_path: Path) -> None:
    with pytest.raises(TunedProfileError, match="nothing was written"):
        write_tuned(str(tmp_path), KEY, {"allowed_media_domains": ["--api-key", SECRET]}, {})
    assert list(tmp_path.iterdir()) == [] or all(p.suffix == ".lock" for p in tmp_path.iterdir())


# ---- properties ----

TRICKY_PREFIXES = [
    "--", "-", "-h", " --", "\t-", "\u2014", "\u2013", "\u2212", "\uff0d", "--api-key=", "--admin-api=",
    "--tp", "-1", "-.5", "- ", "--model-checksum", "=", "", "--api-key=" + SECRET, "--admin-api-key " + SECRET,
]  # fmt: skip
tricky_text = st.one_of(
    st.text(max_size=12),
    st.builds(lambda head, tail: head + tail, st.sampled_from(TRICKY_PREFIXES), st.text(max_size=8)),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    tricky_text,
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.dictionaries(st.text(max_size=4), scalars, max_size=2),
    st.lists(st.lists(scalars, max_size=2), max_size=2),
    st.sets(st.integers(), max_size=2),
)
RENAMED = {"disable-cuda-graph", "cuda-graph-max-bs", "cuda-graph-max-bs-decode", "enable-dp-attention"}
RENAMED |= {"attn-dp-size", "dp-size"}
PLAIN_KEYS = sorted(flag[2:].replace("-", "_") for flag in KINDS if flag[2:] not in RENAMED)
keys = st.one_of(st.sampled_from(PLAIN_KEYS), st.sampled_from(["api_key", "config", "tp"]), tricky_text)


def _typed_value(key: str) -> st.SearchStrategy[Any]:
    """A value of the right shape for the flag's kind (so that most draws get through to the parser)."""
    kind = KINDS["--" + key.replace("_", "-")]
    if kind == "bool":
        return st.booleans()
    if kind == "list":
        return st.lists(st.one_of(tricky_text, st.integers()), max_size=3)
    return st.one_of(
        tricky_text, st.integers(), st.booleans(), st.dictionaries(st.text(max_size=3), scalars, max_size=2)
    )


typed_items = st.sampled_from(PLAIN_KEYS).flatmap(lambda key: st.tuples(st.just(key), _typed_value(key)))
profiles = st.one_of(
    st.lists(typed_items, max_size=6).map(dict),
    st.dictionaries(keys, values, max_size=6),
)


@given(profiles)
def test_a_rendered_options_file_holds_no_option_that_was_not_a_key(profile: dict[Any, Any]) -> None:
    try:
        argv = render_argv({"model_path": "/m", **profile}, VERSION)
        text = render_config(argv, VERSION, SECRET)
    except (SGLangArgsError, ServerConfigError) as exc:
        error = str(exc)
    else:
        error = None
    if error is not None:
        assert SECRET not in error
        return
    config = json.loads(text)
    namespace = parse(expand_like_sglang(config, KINDS))  # Refused here fails the test
    assert namespace.seen == ["--" + key for key in config]
    given_keys = set(normalize({"model_path": "/m", **profile})) | {"api-key"}
    assert set(config) <= given_keys
    for key, value in config.items():
        parsed = getattr(namespace, "value:--" + key)
        assert parsed == ([] if value is True else value)


@given(profiles)
def test_a_rendered_argv_holds_no_option_that_was_not_a_key(profile: dict[Any, Any]) -> None:
    try:
        argv = render_argv({"model_path": "/m", **profile}, VERSION)
    except SGLangArgsError:
        return
    namespace = parse(argv)
    assert namespace.seen == [word for word in argv if word in KINDS]
    assert {flag[2:] for flag in namespace.seen} <= set(normalize({"model_path": "/m", **profile}))


@given(st.lists(st.one_of(st.sampled_from(sorted(KINDS)), tricky_text), max_size=8))
def test_a_raw_argv_becomes_a_file_with_only_its_own_flags(argv: list[str]) -> None:
    try:
        config = config_from_argv(argv, KINDS)
    except ServerConfigError:
        return
    assert parse(expand_like_sglang(config, KINDS)).seen == ["--" + key for key in config]
    assert {"--" + key for key in config} <= set(argv)


@given(tricky_text)
def test_a_word_let_through_is_a_value_to_argparse(word: str) -> None:
    # the release's own parser semantics decide: a word option_in_value lets through is one argparse
    # classifies as a positional (a value), for the flags of every version in the table
    if option_in_value(word) is None:
        assert ALL_FLAGS_PARSER._parse_optional(word) is None


@given(st.dictionaries(keys, values, max_size=4))
def test_a_tuned_file_of_any_shape_is_used_only_when_it_is_a_clean_profile(tmp_path_factory, flags) -> None:
    directory = tmp_path_factory.mktemp("tuned")
    path = directory / "n1.tuned.json"
    try:
        path.write_text(json.dumps({"key": KEY, "flags": flags, "found": {}}))
    except (TypeError, ValueError):
        return  # not JSON (a set): such a file cannot exist
    try:
        found = find_tuned(str(directory), {"host": "n1"})
    except TunedProfileError as exc:
        error = str(exc)
    else:
        error = None
    if error is not None:
        assert str(path) in error
        return
    assert found is not None
    check_profile(found[1]["flags"])
