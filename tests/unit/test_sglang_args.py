"""sglang_args: profiles rendered into an argv for several SGLang versions; bad input named clearly."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.filter.sglang_server_args import FilterModule
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import (
    SGLangArgsError,
    known_flags,
    merge_profiles,
    parse_version,
    render_argv,
)

GLM5 = {
    "tp": 8,
    "quantization": "modelopt_fp4",
    "moe_runner_backend": "flashinfer_cutlass",
    "attention_backend": "triton",
    "max_running_requests": 2048,
    "disable_cuda_graph": True,
    "disable_shared_experts_fusion": True,
}

COMMON = [
    "--tp-size", "8",
    "--quantization", "modelopt_fp4",
    "--moe-runner-backend", "flashinfer_cutlass",
    "--attention-backend", "triton",
    "--max-running-requests", "2048",
]  # fmt: skip


@pytest.mark.parametrize("version", ["0.5.8", "0.5.9", "0.5.10"])
def test_glm5_profile_old_versions_keep_disable_cuda_graph(version):
    assert render_argv(GLM5, version) == [*COMMON, "--disable-cuda-graph", "--disable-shared-experts-fusion"]


@pytest.mark.parametrize("version", ["0.5.19", "0.5.21", "0.5.23", "0.5.24"])
def test_glm5_profile_new_versions_use_cuda_graph_backends(version):
    assert render_argv(GLM5, version) == [
        *COMMON,
        "--disable-shared-experts-fusion",
        "--cuda-graph-backend-decode", "disabled",
        "--cuda-graph-backend-prefill", "disabled",
    ]  # fmt: skip


def test_between_dumped_versions_only_flags_both_neighbours_know():
    # 0.5.13 lies between 0.5.10 and 0.5.19: the cuda-graph backends are new in 0.5.19, so the
    # conservative rendering keeps --disable-cuda-graph, which both neighbours accept.
    assert "--disable-cuda-graph" in render_argv(GLM5, "0.5.13")
    assert "--cuda-graph-backend-decode" not in known_flags("0.5.12.post1")
    assert "--cuda-graph-backend-decode" in known_flags("0.5.19")


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.5.9", ["--cuda-graph-max-bs", "512"]),
        ("0.5.19", ["--cuda-graph-max-bs-decode", "512"]),
        ("0.5.21", ["--cuda-graph-max-bs-decode", "512"]),
        ("0.5.23", ["--cuda-graph-max-bs-decode", "512"]),
    ],
)
def test_cuda_graph_max_bs_mapped(version, expected):
    assert render_argv({"cuda_graph_max_bs": 512}, version) == expected
    assert render_argv({"cuda_graph_max_bs_decode": 512}, version) == expected


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.5.9", ["--dp-size", "4", "--enable-dp-attention"]),
        ("0.5.21", ["--dp-size", "4", "--enable-dp-attention"]),
        ("0.5.22", ["--attn-dp-size", "4"]),
        ("0.5.23", ["--attn-dp-size", "4"]),
    ],
)
def test_dp_attention_mapped(version, expected):
    assert render_argv({"dp_size": 4, "enable_dp_attention": True}, version) == expected
    assert render_argv({"attn_dp_size": 4}, version) == expected


def test_enable_dp_attention_without_dp_size_is_refused():
    with pytest.raises(SGLangArgsError, match="--enable-dp-attention needs dp_size"):
        render_argv({"enable_dp_attention": True}, "0.5.23")


def test_unknown_flag_names_flag_and_version():
    with pytest.raises(SGLangArgsError, match=r"SGLang 0\.5\.23 does not know the flag\(s\) --no-such-flag"):
        render_argv({"tp": 8, "no_such_flag": 1}, "0.5.23")


def test_flag_removed_in_a_version_is_refused_there():
    # --enable-flashinfer-allreduce-fusion is in 0.5.23's parser; check one absent from 0.5.8.
    assert "--attn-dp-size" not in known_flags("0.5.8")
    with pytest.raises(SGLangArgsError, match=r"0\.5\.8 does not know the flag\(s\) --cuda-graph-backend-decode"):
        render_argv({"cuda_graph_backend_decode": "disabled"}, "0.5.8")


def test_booleans_lists_dicts_none():
    argv = render_argv(
        {
            "enable_metrics": True,
            "disable_radix_cache": False,
            "api_key": None,
            "allowed_media_domains": ["a.example", "b.example"],
            "json_model_override_args": {"b": 1, "a": "x"},
        },
        "0.5.23",
    )
    assert argv == [
        "--enable-metrics",
        "--allowed-media-domains", "a.example", "b.example",
        "--json-model-override-args", '{"a":"x","b":1}',
    ]  # fmt: skip


def test_list_for_single_value_flag_is_refused():
    with pytest.raises(SGLangArgsError, match="--attention-backend takes one value"):
        render_argv({"attention_backend": ["triton", "fa3"]}, "0.5.23")


def test_value_for_switch_is_refused():
    with pytest.raises(SGLangArgsError, match="--enable-metrics is a switch"):
        render_argv({"enable_metrics": "yes"}, "0.5.23")


def test_two_spellings_of_one_flag_are_refused():
    with pytest.raises(SGLangArgsError, match="--tp-size is given twice"):
        render_argv({"tp": 8, "tp_size": 4}, "0.5.23")


@pytest.mark.parametrize("version", ["latest", "0.5", "", "0.5.23-1"])
def test_bad_version_is_refused(version):
    with pytest.raises(SGLangArgsError, match="is not a release version"):
        render_argv(GLM5, version)


def test_too_old_version_is_refused():
    with pytest.raises(SGLangArgsError, match=r"0\.4\.10 is older than the oldest"):
        render_argv(GLM5, "0.4.10")


def test_version_order():
    assert (
        parse_version("0.5.12") < parse_version("0.5.12.post1") < parse_version("0.5.13rc0") < parse_version("0.5.13")
    )


def test_merge_profiles_override_and_remove():
    merged = merge_profiles(GLM5, {"max-running-requests": 64, "--disable_cuda_graph": None}, None)
    assert merged["max-running-requests"] == 64
    assert "disable-cuda-graph" not in merged
    assert render_argv(merged, "0.5.23") == [*COMMON[:-1], "64", "--disable-shared-experts-fusion"]


def test_filter_plugin_wraps_errors():
    flt = FilterModule().filters()["sglang_server_args"]
    assert flt({"tp": 2}, "0.5.23") == ["--tp-size", "2"]
    with pytest.raises(AnsibleFilterError, match="--bogus"):
        flt({"bogus": True}, "0.5.23")
