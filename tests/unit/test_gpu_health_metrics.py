# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU health textfile (module_utils/nvidia/gpu_health_metrics.py, gpu_health's textfile option).

The renderings are read back with tests/lib/prometheus.py, a parser of the text exposition format
written from the format's definition (Prometheus, "Exposition formats": label values escape
backslash, double quote and line feed), so a value that could end a label or a line early shows as a
wrong read-back.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from lib.nvidia import FIX, LOGS, VARIANTS, module_args, read, run_gpu_health
from lib.prometheus import parse, unescape

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import FileWriteError
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia import gpu_health_metrics
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health import check_options, evaluate
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health_metrics import (
    LEVEL_VALUES,
    METRICS,
    MetricsError,
    label_value,
    render,
    same_but_time,
    write_textfile,
)
from ansible_collections.gpufleet.sglang.plugins.modules import gpu_health as module

ROOT = Path(__file__).resolve().parents[2]


def utf8(text: str) -> str:
    """``text`` with lone surrogates as U+FFFD (what a label value can carry)."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def result_of(variant: str, log: str = "journal-clean.txt", **opts) -> dict:
    xml = read(VARIANTS / f"{variant}.xml") if variant != "h200" else read(FIX / "h200-580/nvidia-smi-q.xml")
    return evaluate(xml, read(LOGS / log), check_options(opts))


# --------------------------------------------------------------------------- named cases


def test_the_names_are_the_ones_docs_and_rules_read():
    """Every metric rendered is in docs/monitoring.md's table and every gpufleet_gpu/node one there is rendered;
    the rules' health and power expressions read names rendered here."""
    docs = (ROOT / "docs/monitoring.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(gpufleet_(?:gpu|node)_[a-z_]+)` \|", docs, re.M))
    assert documented == set(METRICS)
    rules = (ROOT / "roles/fleet_monitoring/templates/gpufleet-rules.yml.j2").read_text(encoding="utf-8")
    read_by_rules = set(re.findall(r"\b(gpufleet_(?:gpu|node)_[a-z_]+)\b", rules))
    assert read_by_rules
    assert read_by_rules <= set(METRICS)


def test_missing_gpu_node_renders_failed_with_seven_gpus():
    result = result_of("missing-gpu", "journal-xid79-gpu-lost.txt", expected_gpu_count=8)
    samples = parse(render(result, 1764583200))
    by_name = {}
    for name, labels, value in samples:
        by_name.setdefault(name, []).append((labels, value))
    assert by_name["gpufleet_node_health"] == [({}, 2.0)]
    assert by_name["gpufleet_gpu_count"] == [({}, 7.0)]
    assert len(by_name["gpufleet_gpu_health"]) == 7
    assert by_name["gpufleet_gpu_health_timestamp_seconds"] == [({}, 1764583200.0)]
    first = by_name["gpufleet_gpu_health"][0][0]
    assert set(first) == {"gpu", "uuid", "pci_bus_id"}
    assert "node" not in first


def test_link_x8_marks_only_gpu3_degraded_and_power_is_exported():
    samples = parse(render(result_of("link-x8-gen3"), 1.5))
    levels = {labels["gpu"]: value for name, labels, value in samples if name == "gpufleet_gpu_health"}
    assert levels["3"] == LEVEL_VALUES["degraded"]
    assert {g for g, v in levels.items() if v} == {"3"}
    draws = {labels["gpu"]: value for name, labels, value in samples if name == "gpufleet_gpu_power_draw_watts"}
    limits = {labels["gpu"]: value for name, labels, value in samples if name == "gpufleet_gpu_power_limit_watts"}
    assert set(draws) == set(limits) == set(levels)
    assert all(0 < draws[g] <= limits[g] for g in draws)


def test_idle_gpus_have_no_power_series():
    """An idle GPU's draw would read as under-use to GpufleetGpuUnderusedWithQueue once requests wait."""
    names = {name for name, _labels, _value in parse(render(result_of("healthy-idle"), 0))}
    assert names == {
        "gpufleet_node_health",
        "gpufleet_gpu_count",
        "gpufleet_gpu_health",
        "gpufleet_gpu_health_timestamp_seconds",
    }


def test_power_brake_xml_is_degraded_and_real_h200_healthy():
    assert parse(render(result_of("power-brake"), 0))[0] == ("gpufleet_node_health", {}, 1.0)
    text = render(result_of("h200"), 0)
    assert 'gpufleet_gpu_health{gpu="0",uuid="GPU-4b715da6-802e-b031-afc0-ccbc02cb5c16",' in text
    assert "gpufleet_node_health 0\n" in text


def test_nvidia_smi_missing_renders_node_failed_and_no_gpu_series():
    result = evaluate(None, None, check_options({}), smi_problem="nvidia-smi not found at nvidia-smi")
    names = [name for name, _labels, _value in parse(render(result, 0))]
    assert names == ["gpufleet_node_health", "gpufleet_gpu_count", "gpufleet_gpu_health_timestamp_seconds"]


def test_label_values_are_escaped():
    assert label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert label_value("\ud800x") == "\ufffdx"


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ([], "the result is a list, not a mapping"),
        ({"level": "sick", "gpus": []}, "level is 'sick', not one of healthy, degraded, failed"),
        ({"level": "healthy"}, "gpus is not a list"),
        ({"level": "healthy", "gpus": [], "gpu_count": "8"}, "gpu_count is not a whole number"),
        ({"level": "healthy", "gpus": ["x"]}, "gpus[0] is not a mapping"),
        ({"level": "healthy", "gpus": [{"index": True, "level": "healthy"}]}, "gpus[0].index is not a whole number"),
        ({"level": "healthy", "gpus": [{"index": 0, "level": None}]}, "gpus[0].level is None"),
        ({"level": "healthy", "gpus": [{"index": 0, "level": "healthy", "uuid": 5}]}, "gpus[0].uuid is not text"),
        (
            {"level": "healthy", "gpus": [{"index": 0, "level": "healthy", "busy": 1}]},
            "gpus[0].busy is not true or false",
        ),
        (
            {"level": "healthy", "gpus": [{"index": 0, "level": "healthy", "busy": True, "power": {"draw_w": "9"}}]},
            "gpus[0].power.draw_w is not a number",
        ),
        (
            {"level": "healthy", "gpus": [{"index": 0, "level": "healthy"}, {"index": 0, "level": "healthy"}]},
            "gpus[1].index 0 appears twice",
        ),
    ],
)
def test_wrong_shapes_get_a_named_error(result, message):
    with pytest.raises(MetricsError, match=re.escape(message)):
        render(result, 0)


def test_timestamp_must_be_finite():
    with pytest.raises(MetricsError, match="the timestamp is not a finite number"):
        render({"level": "healthy", "gpus": []}, math.nan)


def test_same_but_time():
    result = result_of("healthy-idle")
    assert same_but_time(render(result, 1), render(result, 2))
    assert not same_but_time(render(result, 1), render(result_of("power-brake"), 1))


def test_write_textfile_atomically_and_changed_only_on_news(tmp_path):
    path = tmp_path / "gpufleet_gpu_health.prom"
    healthy, brake = result_of("healthy-idle"), result_of("power-brake")
    assert write_textfile(str(path), render(healthy, 1)) is True
    assert write_textfile(str(path), render(healthy, 2)) is False
    assert path.read_text(encoding="utf-8") == render(healthy, 2)
    assert write_textfile(str(path), render(brake, 3)) is True
    assert sorted(os.listdir(tmp_path)) == ["gpufleet_gpu_health.prom"]  # no temporary left
    assert oct(path.stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize(
    ("name", "message"),
    [("health.txt", "does not end in .prom"), ("absent/health.prom", "does not exist (create it")],
)
def test_write_textfile_refuses_and_writes_nothing(tmp_path, name, message):
    with pytest.raises(MetricsError, match=re.escape(message)):
        write_textfile(str(tmp_path / name), "x 1\n")
    assert os.listdir(tmp_path) == []


def test_write_textfile_creates_a_missing_directory_when_asked_and_leaves_an_existing_one(tmp_path):
    path = tmp_path / "node-exporter" / "sub" / "h.prom"
    assert write_textfile(str(path), "x 1\n", create_dir=True) is True
    assert path.read_text(encoding="utf-8") == "x 1\n"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o755"
    path.parent.chmod(0o750)  # the node exporter's role owns an existing directory's mode
    assert write_textfile(str(path), "x 2\n", create_dir=True) is True
    assert oct(path.parent.stat().st_mode & 0o777) == "0o750"


def test_write_textfile_names_a_directory_it_cannot_create(tmp_path):
    (tmp_path / "file").write_text("", encoding="utf-8")
    with pytest.raises(MetricsError, match=r"cannot create the directory .*/file/dir: Not a directory"):
        write_textfile(str(tmp_path / "file" / "dir" / "h.prom"), "x 1\n", create_dir=True)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(MetricsError, match=r"does not exist \(create it"):
        write_textfile(str(link / "h.prom"), "x 1\n", create_dir=True)
    assert not (tmp_path / "nowhere").exists()


def test_write_textfile_names_an_unreadable_old_file(tmp_path):
    (tmp_path / "h.prom").mkdir()
    with pytest.raises(MetricsError, match=r"h\.prom' cannot be read: Is a directory"):
        write_textfile(str(tmp_path / "h.prom"), "x 1\n")


def test_write_textfile_names_a_failed_write_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "h.prom"
    path.write_text("old 1\n", encoding="utf-8")

    def no_space(*args, **kwargs):
        raise FileWriteError(f"cannot write {path}: No space left on device", 28)

    monkeypatch.setattr(gpu_health_metrics, "replace_file", no_space)
    with pytest.raises(MetricsError, match=r"cannot write .*h\.prom: No space left on device"):
        write_textfile(str(path), "new 1\n")
    assert path.read_text(encoding="utf-8") == "old 1\n"


# --------------------------------------------------------------------------- the module's textfile option


def test_module_writes_the_textfile_and_fails_after_writing(tmp_path):
    prom = tmp_path / "gpufleet_gpu_health.prom"
    args = module_args("journal-xid79-gpu-lost.txt", expected_gpu_count=8, fail_on="failed", textfile=str(prom))
    rc, result = run_gpu_health(tmp_path, args, profile="rtxpro6000-8gpu-missing-gpu")
    assert rc == 1
    assert result["msg"].startswith("GPU health: failed: 7 of 8 expected GPUs present")
    assert result["textfile"] == {"path": str(prom), "written": True}
    assert result["changed"] is True
    assert ("gpufleet_node_health", {}, 2.0) in parse(prom.read_text(encoding="utf-8"))


def test_module_textfile_unchanged_on_the_same_verdict_and_untouched_in_check_mode(tmp_path):
    prom = tmp_path / "h.prom"
    args = module_args(textfile=str(prom))
    assert run_gpu_health(tmp_path, {**args, "_ansible_check_mode": True})[1]["textfile"]["written"] is False
    assert not prom.exists()
    assert run_gpu_health(tmp_path, args)[1]["changed"] is True
    rc, again = run_gpu_health(tmp_path, args)
    assert (rc, again["changed"]) == (0, False)


def test_module_textfile_error_names_the_fix(tmp_path):
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    rc, result = run_gpu_health(tmp_path, module_args(textfile=str(tmp_path / "a-file/nowhere/h.prom")))
    assert rc == 1
    assert "the textfile was not written" in result["msg"]
    assert "cannot create the directory" in result["msg"]


def test_module_creates_a_missing_textfile_directory(tmp_path):
    rc, result = run_gpu_health(tmp_path, module_args(textfile=str(tmp_path / "node-exporter/h.prom")))
    assert rc == 0, result
    assert result["textfile"]["written"] is True
    assert (tmp_path / "node-exporter" / "h.prom").is_file()


def test_textfile_doc_lists_the_metrics():
    doc = yaml.safe_load(module.DOCUMENTATION)["options"]["textfile"]["description"][0]
    assert set(re.findall(r"C\((gpufleet_[a-z_]+)\)", doc)) == set(METRICS)


# --------------------------------------------------------------------------- fuzz

TEXT = st.text(st.characters() | st.sampled_from('"\\\n}{,= '), max_size=40)
LEVEL = st.sampled_from(sorted(LEVEL_VALUES))
WATTS = st.none() | st.floats(min_value=0, max_value=2000, allow_nan=False)


@given(
    LEVEL,
    st.lists(
        st.fixed_dictionaries(
            {
                "busy": st.booleans(),
                "level": LEVEL,
                "uuid": TEXT,
                "pci_bus_id": TEXT,
                "power": st.fixed_dictionaries({"draw_w": WATTS, "limit_w": WATTS}),
            }
        ),
        max_size=4,
    ),
    st.floats(min_value=0, max_value=4e9, allow_nan=False),
)
def test_fuzz_render_reads_back_every_label_and_value(level, gpus, when):
    """Any uuid or bus id text: each sample on one line, its labels read back as given, levels as numbers."""
    records = [dict(gpu, index=i) for i, gpu in enumerate(gpus)]
    samples = parse(render({"level": level, "gpus": records}, when))
    health = [(labels, value) for name, labels, value in samples if name == "gpufleet_gpu_health"]
    assert [value for _labels, value in health] == [LEVEL_VALUES[g["level"]] for g in records]
    for (labels, _value), gpu in zip(health, records, strict=True):
        assert labels == {"gpu": str(gpu["index"]), "uuid": utf8(gpu["uuid"]), "pci_bus_id": utf8(gpu["pci_bus_id"])}
    draws = {labels["gpu"]: value for name, labels, value in samples if name == "gpufleet_gpu_power_draw_watts"}
    expected = {
        str(g["index"]): g["power"]["draw_w"] for g in records if g["busy"] and g["power"]["draw_w"] is not None
    }
    assert draws == expected
    assert ("gpufleet_node_health", {}, float(LEVEL_VALUES[level])) in samples
    assert [v for n, _l, v in samples if n == "gpufleet_gpu_health_timestamp_seconds"] == [when]


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: (
            st.lists(c, max_size=3)
            | st.dictionaries(
                st.sampled_from(["level", "gpus", "index", "uuid", "power", "draw_w", "gpu_count"]), c, max_size=4
            )
        ),
        max_leaves=12,
    )
)
def test_fuzz_any_shape_renders_or_names_the_field(result):
    problem = text = None
    try:
        text = render(result, 0)
    except MetricsError as exc:
        problem = str(exc)
    if text is None:
        assert re.search(r"(result|level|gpus|gpu_count|index|uuid|pci_bus_id|power|draw_w|limit_w|timestamp)", problem)
    else:
        assert parse(text)[0][0] == "gpufleet_node_health"


@given(TEXT)
def test_fuzz_label_value_never_leaves_its_quotes(text):
    escaped = label_value(text)
    assert "\n" not in escaped
    assert not re.search(r'(?<!\\)(?:\\\\)*"', escaped)
    assert unescape(escaped) == utf8(text)
