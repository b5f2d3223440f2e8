"""sglang_source: the autotune whitelist read with ast from real SGLang wheels and synthetic variants."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from lib.sglang_wheels import install_wheel, read_member

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.source import (
    LAYOUTS,
    MAX_FILE_BYTES,
    SourceError,
    analyse_autotune_source,
    commented_entries,
    inspect_sglang,
    record_sha256,
    version_from_metadata,
    version_from_source,
)

LAYOUT = {layout.name: layout for layout in LAYOUTS}

# What docs/sglang-versions-and-flags.md says each released wheel holds.
EXPECTED = {
    "0.5.8": (
        "model_runner",
        "ModelRunner._should_run_flashinfer_autotune",
        ["flashinfer_trtllm", "flashinfer_mxfp4"],
        ["flashinfer_cutlass"],
    ),
    "0.5.12.post1": (
        "model_runner",
        "ModelRunner._should_run_flashinfer_autotune",
        ["flashinfer_trtllm", "flashinfer_mxfp4", "flashinfer_cutedsl"],
        ["flashinfer_trtllm_routed", "flashinfer_cutlass"],
    ),
    "0.5.13": (
        "model_runner",
        "ModelRunner._should_run_flashinfer_autotune",
        [
            "flashinfer_trtllm",
            "flashinfer_trtllm_routed",
            "flashinfer_mxfp4",
            "flashinfer_cutedsl",
            "flashinfer_cutlass",
        ],
        [],
    ),
    "0.5.14": (
        "base_runner",
        "BaseRunner._should_run_flashinfer_autotune",
        [
            "flashinfer_trtllm",
            "flashinfer_trtllm_routed",
            "flashinfer_mxfp4",
            "flashinfer_cutedsl",
            "flashinfer_cutlass",
        ],
        [],
    ),
    "0.5.23": (
        "flashinfer_autotune",
        "should_run_flashinfer_autotune",
        [
            "flashinfer_trtllm",
            "flashinfer_trtllm_routed",
            "flashinfer_mxfp4",
            "flashinfer_cutedsl",
            "flashinfer_cutlass",
            "flashinfer_megamoe",
        ],
        [],
    ),
}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def installed(request, tmp_path_factory) -> tuple[str, Path]:
    version = request.param
    return version, install_wheel(version, tmp_path_factory.mktemp(f"sglang-{version}"))


def test_inspect_real_wheel(installed):
    version, root = installed
    layout, function, active, commented = EXPECTED[version]
    facts = inspect_sglang(str(root))
    assert facts["version"] == version
    assert facts["layout"] == layout
    assert facts["autotune_function"] == function
    assert facts["autotune_relpath"] == LAYOUT[layout].relpath
    assert facts["autotune_file"] == str(root / LAYOUT[layout].relpath)
    assert facts["autotuned_backends"] == active
    assert facts["commented_backends"] == commented
    assert facts["autotune_file_pristine"] is True
    assert facts["autotune_file_sha256"] == hashlib.sha256((root / LAYOUT[layout].relpath).read_bytes()).hexdigest()


def test_whitelist_context_is_the_files_own_lines(installed):
    _version, root = installed
    facts = inspect_sglang(str(root))
    lines = (root / facts["autotune_relpath"]).read_text(encoding="utf-8").splitlines()
    wl = facts["whitelist"]
    start = wl["context_start_line"]
    assert wl["context_lines"] == lines[start - 1 : start - 1 + len(wl["context_lines"])]
    assert start == wl["start_line"] - 3
    assert "[" in lines[wl["start_line"] - 1]
    assert lines[wl["end_line"] - 1].strip().startswith("]")
    for entry in wl["commented"]:
        assert lines[entry["line"] - 1].strip() == f'# "{entry["backend"]}",'


def test_commented_lines_differ_between_0_5_8_and_0_5_12(tmp_path):
    old = inspect_sglang(str(install_wheel("0.5.8", tmp_path / "a")))["whitelist"]
    new = inspect_sglang(str(install_wheel("0.5.12.post1", tmp_path / "b")))["whitelist"]
    assert old["context_lines"] != new["context_lines"]
    assert [c["backend"] for c in old["commented"]] == ["flashinfer_cutlass"]
    assert [c["backend"] for c in new["commented"]] == ["flashinfer_trtllm_routed", "flashinfer_cutlass"]


def test_modified_file_is_not_pristine(tmp_path):
    root = install_wheel("0.5.8", tmp_path)
    target = root / LAYOUT["model_runner"].relpath
    target.write_text(target.read_text(encoding="utf-8").replace('# "flashinfer_cutlass",', '"flashinfer_cutlass",'))
    facts = inspect_sglang(str(root))
    assert facts["autotune_file_pristine"] is False
    assert facts["autotuned_backends"] == ["flashinfer_trtllm", "flashinfer_mxfp4", "flashinfer_cutlass"]
    assert facts["commented_backends"] == []


def test_version_from_real_version_files():
    assert version_from_source(read_member("0.5.8", "sglang/_version.py")) == "0.5.8"
    assert version_from_source(read_member("0.5.12.post1", "sglang/_version.py")) == "0.5.12.post1"
    # sglang/version.py only re-exports; it holds no literal
    assert version_from_source(read_member("0.5.23", "sglang/version.py")) is None


def test_version_falls_back_to_metadata(tmp_path):
    root = install_wheel("0.5.13", tmp_path)
    (root / "sglang" / "_version.py").unlink()
    assert inspect_sglang(str(root))["version"] == "0.5.13"
    assert version_from_metadata("Metadata-Version: 2.4\nName: sglang\nVersion: 0.5.9\n") == "0.5.9"
    assert version_from_metadata("Name: sglang\n") is None


def test_record_sha256():
    record = "sglang/a.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\nsglang/b.py,,\n"
    assert record_sha256(record, "sglang/a.py") == hashlib.sha256(b"").hexdigest()
    assert record_sha256(record, "sglang/b.py") is None
    assert record_sha256(record, "sglang/c.py") is None


SYNTHETIC = """
class ModelRunner:
    def _should_run_flashinfer_autotune(self) -> bool:
        backend = self.server_args.moe_runner_backend
        if self.model_config.quantization in ("modelopt_fp4", "modelopt_mixed"):
            pass
        if backend not in (
            'flashinfer_trtllm',
            #   'flashinfer_cutlass'
            # "flashinfer_trtllm",
            # a comment that is not an entry
        ):
            return False
        return True
"""


def test_synthetic_tuple_single_quotes_and_comment_variants():
    facts = analyse_autotune_source(SYNTHETIC, LAYOUT["model_runner"], "9.9.9")
    assert facts is not None
    assert facts["autotuned_backends"] == ["flashinfer_trtllm"]
    # a commented duplicate of an active entry is not "commented"; free-text comments are not entries
    assert facts["commented_backends"] == ["flashinfer_cutlass"]
    assert facts["whitelist"]["commented"] == [{"backend": "flashinfer_cutlass", "line": 9}]


def test_synthetic_positive_membership_on_attribute():
    text = "def should_run_flashinfer_autotune(mr):\n    ok = mr.args.moe_runner_backend in {'a', 'b'}\n    return ok\n"
    facts = analyse_autotune_source(text, LAYOUT["flashinfer_autotune"], "1.0")
    assert facts is not None
    assert sorted(facts["autotuned_backends"]) == ["a", "b"]


def test_function_absent_returns_none():
    assert analyse_autotune_source("class ModelRunner:\n    pass\n", LAYOUT["model_runner"], "1.0") is None
    # a module-level function of the same name is not the method
    text = "def _should_run_flashinfer_autotune():\n    return backend in ['x']\n"
    assert analyse_autotune_source(text, LAYOUT["model_runner"], "1.0") is None


def test_function_without_whitelist_fails_naming_function_and_version():
    text = "class BaseRunner:\n    def _should_run_flashinfer_autotune(self):\n        return True\n"
    with pytest.raises(
        SourceError, match=r"no MoE backend whitelist.*BaseRunner\._should_run_flashinfer_autotune.*SGLang 7\.7"
    ):
        analyse_autotune_source(text, LAYOUT["base_runner"], "7.7")


def test_two_whitelists_are_ambiguous():
    text = "def should_run_flashinfer_autotune(b_backend):\n    return b_backend in ['x'] or b_backend in ['y']\n"
    with pytest.raises(SourceError, match="2 candidate backend whitelists"):
        analyse_autotune_source(text, LAYOUT["flashinfer_autotune"], "1.0")


def test_unparsable_file_fails_naming_file():
    with pytest.raises(SourceError, match=r"cannot parse sglang/srt/model_executor/model_runner.py \(SGLang 1\.0\)"):
        analyse_autotune_source("def (:\n", LAYOUT["model_runner"], "1.0")


def test_unknown_layout_names_every_file_and_the_version(tmp_path):
    root = install_wheel("0.5.13", tmp_path)
    runner = root / LAYOUT["model_runner"].relpath
    runner.write_text(
        runner.read_text(encoding="utf-8").replace("_should_run_flashinfer_autotune", "_renamed_decision")
    )
    with pytest.raises(SourceError) as excinfo:
        inspect_sglang(str(root))
    message = str(excinfo.value)
    assert "SGLang 0.5.13" in message
    for layout in LAYOUTS:
        assert layout.relpath in message
        assert layout.qualname in message


def test_no_sglang_package(tmp_path):
    with pytest.raises(SourceError, match="no sglang package under"):
        inspect_sglang(str(tmp_path))


def test_commented_entries_window():
    lines = ["x = [", '    # "a",', '    "b",', "]", '# "c",']
    assert commented_entries(lines, 1, 4) == [{"backend": "a", "line": 2}]


# ---- ambiguity and parser limits are errors, never a silent answer -----------------------------

WHITELIST_METHOD = """    def _should_run_flashinfer_autotune(self) -> bool:
        backend = self.server_args.moe_runner_backend
        if backend not in [{entries}]:
            return False
        return True
"""


def _runner(*methods: str) -> str:
    return "class ModelRunner:\n" + "\n".join(methods)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Python uses the second definition; reading the first would build the patch from the wrong list
        (
            _runner(WHITELIST_METHOD.format(entries='"a"'), WHITELIST_METHOD.format(entries='"b"')),
            r"ModelRunner\._should_run_flashinfer_autotune is bound 2 times \(lines 2, 8\)",
        ),
        (
            _runner(WHITELIST_METHOD.format(entries='"a"')) + "\nclass ModelRunner:\n    pass\n",
            r"class ModelRunner is bound 2 times \(lines 1, 8\)",
        ),
        (
            "import os\nclass ModelRunner:\n    if os.environ.get('X'):\n"
            + "\n".join("    " + line for line in WHITELIST_METHOD.format(entries='"a"').splitlines())
            + "\n    else:\n        _should_run_flashinfer_autotune = None\n",
            r"is bound 2 times \(lines 4, 10\)",
        ),
        (
            _runner("    _should_run_flashinfer_autotune = staticmethod(lambda: True)\n"),
            r"ModelRunner\._should_run_flashinfer_autotune at line 2 is not a plain definition \(Assign\)",
        ),
    ],
)
def test_rebound_definition_is_refused_naming_file_and_lines(text, message):
    with pytest.raises(SourceError, match=r"sglang/srt/model_executor/model_runner\.py \(SGLang 1\.0\): .*" + message):
        analyse_autotune_source(text, LAYOUT["model_runner"], "1.0")


def test_module_level_function_defined_twice_is_refused():
    one = "def should_run_flashinfer_autotune(backend):\n    return backend in ['a']\n"
    two = "def should_run_flashinfer_autotune(backend):\n    return backend in ['b']\n"
    with pytest.raises(SourceError, match=r"flashinfer_autotune\.py .*bound 2 times \(lines 1, 3\)"):
        analyse_autotune_source(one + two, LAYOUT["flashinfer_autotune"], "1.0")


def test_backend_list_with_a_non_literal_entry_is_refused():
    # Before: this list was skipped silently and the later one reported as the whitelist.
    text = _runner(
        WHITELIST_METHOD.format(entries='"flashinfer_trtllm", EXTRA_BACKEND')
        + "        if backend in ['flashinfer_cutlass']:\n            return True\n"
    )
    with pytest.raises(
        SourceError,
        match=r"model_runner\.py \(SGLang 1\.0\): the backend list at line 4 has an entry that is not a string "
        r"literal \(line 4: EXTRA_BACKEND\); cannot read it completely",
    ):
        analyse_autotune_source(text, LAYOUT["model_runner"], "1.0")


@pytest.mark.parametrize(
    ("padding", "limit"),
    [("x = " + "1+" * 300000 + "1\n", "recursion"), ("x = " + "-" * 300000 + "1\n", "memory")],
)
def test_parser_limits_are_named(padding, limit):
    text = _runner(WHITELIST_METHOD.format(entries='"a"')) + padding
    with pytest.raises(
        SourceError, match=rf"cannot parse .*model_runner\.py \(SGLang 1\.0\): the parser ran out of {limit}"
    ):
        analyse_autotune_source(text, LAYOUT["model_runner"], "1.0")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "sglang/a.py,sha256=not*base64!,10",
            r"RECORD line 2: sha256 digest 'not\*base64!' of sglang/a.py is not valid base64",
        ),
        # 41 characters: the raw binascii.Error of the issue ("cannot be 1 more than a multiple of 4")
        ("sglang/a.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSu,0", r"RECORD line 2: .* is not valid base64"),
        ("sglang/a.py,sha256=AAAA,0", r"RECORD line 2: sha256 digest of sglang/a.py is 3 bytes, not 32"),
        ("sglang/a.py,47DEQpj8HBSa,0", r"RECORD line 2: entry for sglang/a.py is not 'path,<algorithm>=<digest>,size'"),
        ("sglang/a.py,sha256=x", r"RECORD line 2: entry for sglang/a.py is not"),
    ],
)
def test_malformed_record_line_is_named(line, message):
    record = f"sglang/__init__.py,,\n{line}\n"
    with pytest.raises(SourceError, match=message):
        record_sha256(record, "sglang/a.py")


def test_record_listing_a_file_twice_with_different_digests_is_refused():
    empty = "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    other = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    record = f"sglang/a.py,sha256={empty},0\nsglang/a.py,sha256={other},0\n"
    with pytest.raises(SourceError, match=r"RECORD line 2: sglang/a\.py is listed again with a different sha256"):
        record_sha256(record, "sglang/a.py")
    assert record_sha256(f"sglang/a.py,sha256={empty},0\nsglang/a.py,sha512=abc,0\n", "sglang/a.py") is not None


def test_file_over_the_size_cap_is_refused(tmp_path):
    root = install_wheel("0.5.13", tmp_path)
    runner = root / LAYOUT["model_runner"].relpath
    with runner.open("a", encoding="utf-8") as handle:
        handle.write("#" * (MAX_FILE_BYTES + 1) + "\n")
    with pytest.raises(SourceError, match=rf"model_runner\.py is larger than {MAX_FILE_BYTES} bytes"):
        inspect_sglang(str(root))
