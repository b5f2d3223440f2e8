# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pieces around the search: the node's sweep journal, the controller's sweep and tuned profile
files (keyed like the gate's baselines) and the lookup role sglang_server reads them with, and the
action's classification of candidates."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from lib.playbook import run_tool

from ansible_collections.gpufleet.sglang.plugins.action.sglang_tune import candidate_flags, failure_status, power_pct
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import Paths, make_key
from ansible_collections.gpufleet.sglang.plugins.module_utils.tune import journal as tune_journal
from ansible_collections.gpufleet.sglang.plugins.module_utils.tune.profile import (
    TunedProfileError,
    find_tuned,
    write_sweep,
    write_tuned,
)

KEY = make_key(
    host="n1", model="GLM-5-NVFP4", profile="glm5_nvfp4_tp8", sglang_version="0.5.23", gpu_model="RTX PRO 6000"
)


def test_journal_round_trip_is_private_and_atomic(tmp_path):
    path = str(tmp_path / "d" / "tune-journal.json")
    assert tune_journal.read(path) is None
    tune_journal.write(path, {"state": "begun", "original": "d-1"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert tune_journal.read(path) == {"state": "begun", "original": "d-1", "version": 1}
    assert [p for p in os.listdir(tmp_path / "d") if p.endswith(".tmp")] == []
    assert tune_journal.remove(path) is True
    assert tune_journal.remove(path) is False


def test_a_journal_that_cannot_be_written_is_named_and_the_old_one_kept(tmp_path, monkeypatch):
    """The journal and the candidate's options are written by atomic_file.replace_file (one atomic write)."""
    path = str(tmp_path / "tune-journal.json")
    tune_journal.write(path, {"state": "begun", "original": "d-1"})

    def refuse(*args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match=f"cannot write {path}: Permission denied"):
        tune_journal.write(path, {"state": "candidate", "original": "d-1"})
    with pytest.raises(OSError, match=f"cannot write {path}: Permission denied"):
        tune_journal.install(path, b"{}", like=path)
    monkeypatch.undo()
    assert tune_journal.read(path)["state"] == "begun"
    assert os.listdir(tmp_path) == ["tune-journal.json"]


def test_an_unreadable_journal_still_means_restore(tmp_path):
    path = tmp_path / "j.json"
    path.write_text("{torn")
    assert tune_journal.read(str(path))["state"] == "unreadable"


def test_install_keeps_mode_and_owner(tmp_path):
    target = tmp_path / "sglang-server.yaml"
    target.write_text("{}\n")
    os.chmod(target, 0o600)
    tune_journal.install(str(target), b'{"tp-size": 8}\n', like=str(target))
    assert target.read_text() == '{"tp-size": 8}\n'
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600


def test_sweep_and_tuned_files_are_keyed_like_the_baselines(tmp_path):
    stem = Paths.for_key(str(tmp_path), KEY).baseline[: -len(".json")]
    path = write_sweep(str(tmp_path), KEY, {"evaluated": 3})
    assert path == stem + ".sweep.json"
    write_sweep(str(tmp_path), KEY, {"evaluated": 4})
    with open(path, encoding="utf-8") as handle:
        assert json.load(handle)["evaluated"] == 4
    with open(stem + ".sweeps.jsonl", encoding="utf-8") as handle:
        assert len(handle.read().splitlines()) == 2
    tuned = write_tuned(str(tmp_path), KEY, {"attention_backend": "triton"}, {"p_vs_original": 0.004})
    assert tuned == stem + ".tuned.json"
    found = find_tuned(str(tmp_path), {"host": "n1", "profile": "glm5_nvfp4_tp8", "sglang_version": "0.5.23"})
    assert found is not None
    assert found[1]["flags"] == {"attention_backend": "triton"}
    assert find_tuned(str(tmp_path), {"host": "n2"}) is None


def test_two_matching_tuned_profiles_are_an_error(tmp_path):
    write_tuned(str(tmp_path), KEY, {"a": 1}, {})
    write_tuned(str(tmp_path), dict(KEY, gpu_model="H200"), {"a": 2}, {})
    with pytest.raises(TunedProfileError, match="more than one tuned profile"):
        find_tuned(str(tmp_path), {"host": "n1"})


def _lookup(directory, **args) -> tuple[int, str]:
    """Run the lookup the way role sglang_server does, in a real ansible run."""
    terms = ", ".join(f"{k}={v!r}" for k, v in args.items())
    expr = f"{{{{ lookup('gpufleet.sglang.sglang_tuned_profile', {str(directory)!r}, {terms}) | to_json }}}}"
    done = run_tool(
        "ansible", "localhost", "-c", "local", "-m", "ansible.builtin.debug", "-a", f"msg={expr}", timeout=120
    )
    return done.rc, done.output


def test_lookup_returns_the_flags_or_nothing(tmp_path):
    write_tuned(str(tmp_path), KEY, {"max_running_requests": 1024}, {})
    args = {"host": "n1", "profile": "glm5_nvfp4_tp8", "sglang_version": "0.5.23"}
    rc, out = _lookup(tmp_path, **args)
    assert rc == 0, out
    assert """msg: '{"max_running_requests": 1024}'""" in out
    rc, out = _lookup(tmp_path, **{**args, "sglang_version": "0.5.24"})
    assert rc == 0, out
    assert "msg: '{}'" in out
    (tmp_path / "x.tuned.json").write_text("[]")
    rc, out = _lookup(tmp_path, **args)
    assert rc != 0
    assert "x.tuned.json has no key/flags" in out


def test_candidate_flags_merge_over_the_node_flags():
    base = {"tp": 8, "attention_backend": "flashinfer", "disable_cuda_graph": True, "enable_metrics": True}
    flags = candidate_flags(
        base, {"attention_backend": "triton", "disable_cuda_graph": False, "mem_fraction_static": None}
    )
    # spelled as role sglang_server's merge spells them (flag names), false and null removed
    assert flags == {"tp-size": 8, "attention-backend": "triton", "enable-metrics": True}


@pytest.mark.parametrize(
    ("ready", "status"),
    [
        ({"verdict": "crashloop", "journal": ["ValueError: FlashAttention v3 ..."]}, "crashed"),
        ({"verdict": "failed", "journal": ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"]}, "oom"),
        ({"verdict": "timeout", "journal": []}, "not_ready"),
        ({"verdict": "stopped"}, "crashed"),
    ],
)
def test_failure_status(ready, status):
    assert failure_status(ready) == status


def test_power_pct_is_the_mean_over_gpus():
    assert (
        power_pct({"telemetry": {"gpus": [{"avg_power_pct_of_limit": 40.0}, {"avg_power_pct_of_limit": 50.0}]}}) == 45.0
    )
    assert power_pct({"telemetry": {"available": False}}) is None
    assert power_pct({}) is None


def test_role_argument_spec_and_defaults_agree():
    import yaml  # noqa: PLC0415

    role = Path(__file__).resolve().parents[2] / "roles" / "sglang_tune"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text(encoding="utf-8"))
    # sglang_root's default comes from the role's meta dependency sglang_common, merged under its own
    meta = yaml.safe_load((role / "meta" / "main.yml").read_text(encoding="utf-8"))
    assert {"role": "gpufleet.sglang.sglang_common"} in meta["dependencies"]
    common = role.parent / "sglang_common" / "defaults" / "main.yml"
    # (sglang_common holds the collection's other cross-role defaults too; this role declares the one it documents)
    defaults = {"sglang_root": yaml.safe_load(common.read_text(encoding="utf-8"))["sglang_root"], **defaults}
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))["argument_specs"][
        "main"
    ]["options"]
    assert set(options) == set(defaults)
    for name, spec in options.items():
        if "default" in spec:
            assert spec["default"] == defaults[name], name
