# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report: the numbers in its tables are those of the files (real lab gate history and a
sweep, tests/unit/fixtures/report/); playbooks/report.yml writes the page; headless Chromium
renders it with its three charts and no console error."""

from __future__ import annotations

import base64
import json
import os
import shutil
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.fuzz import examples
from lib.playbook import run_playbook

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.report import (
    ALERT_COLUMNS,
    COLD_START_COLUMNS,
    RUN_COLUMNS,
    SWEEP_COLUMNS,
    alert_episodes,
    alert_rows,
    display_text,
    load_history,
    load_sweeps,
    markers,
    render_html,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "report"
CHROMIUM = "/usr/bin/chromium"


class Tables(HTMLParser):
    """The page's tables by class: a list of rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[list[str]]]] = {}
        self._rows: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self.images: list[dict[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._rows = []
            self.tables.setdefault(a.get("class") or "", []).append(self._rows)
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = []
        elif tag == "img":
            self.images.append(a)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._rows is not None:
            self._rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _records():
    """Independent reading of the fixture history: every line of every file, oldest first."""
    out = []
    for path in sorted(FIXTURES.glob("*.history.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(out, key=lambda r: (r["time"], r["host"]))


def _page(tmp_path):
    runs, problems = load_history(str(FIXTURES))
    sweeps, sweep_problems = load_sweeps(str(FIXTURES))
    text = render_html(
        "t", "now", str(FIXTURES), runs=runs, sweeps=sweeps, charts={}, problems=problems + sweep_problems
    )
    parser = Tables()
    parser.feed(text)
    return parser, problems + sweep_problems


def test_run_table_numbers_are_the_history_files(tmp_path):
    parser, problems = _page(tmp_path)
    assert problems == []
    (table,) = parser.tables["runs"]
    head, *rows = table
    assert head == RUN_COLUMNS
    records = _records()
    assert len(rows) == len(records) == 5
    col = {name: i for i, name in enumerate(head)}
    for row, rec in zip(rows, records, strict=True):
        assert row[col["time"]] == rec["time"]
        assert row[col["SGLang"]] == rec["key"]["sglang_version"]
        assert row[col["model revision"]] == rec["key"]["model_revision"]
        assert float(row[col["median tok/s"]]) == rec["median_output_tokens_per_s"]
        base = rec["baseline_median"]
        assert row[col["baseline tok/s"]] == ("-" if base is None else str(base))
        assert row[col["verdict"]] == rec["verdict"]
        assert int(row[col["trials"]]) == len(rec["trials"])
        gpus = rec["telemetry"]["gpus"]
        pct = round(sum(g["avg_power_pct_of_limit"] for g in gpus) / len(gpus), 1)
        assert float(row[col["GPU power % of limit"]]) == pct
        assert float(row[col["limit W"]]) == max(g["power_limit_w"] for g in gpus)
    # the regression of the 0.5.13 run is in the table as recorded
    regression = next(r for r in rows if r[col["SGLang"]] == "0.5.13")
    assert regression[col["verdict"]] == "fail"
    assert regression[col["delta %"]] == "-22.59"


def test_sweep_table_numbers_are_the_sweep_file(tmp_path):
    parser, _problems = _page(tmp_path)
    (table,) = parser.tables["sweep"]
    head, *rows = table
    assert head == SWEEP_COLUMNS
    (path,) = FIXTURES.glob("*.sweep.json")
    sweep = json.loads(path.read_text())
    assert len(rows) == len(sweep["candidates"])
    for row, c in zip(rows, sweep["candidates"], strict=True):
        assert row[1] == c["flags"]
        assert row[2] == c["status"]
        med = c["median_output_tokens_per_s"]
        assert row[3] == ("-" if med is None else str(med))
        power = c["gpu_power_pct_of_limit"]
        assert row[5] == ("-" if power is None else str(power))
        assert row[6] == c["verdict"]


def test_history_lines_of_both_names_of_the_summary_row_are_read(tmp_path):
    # the fixtures were recorded when the record's summary row was called summary_line;
    # lines written since carry host_summary_row: the report reads both
    path = sorted(FIXTURES.glob("*.history.jsonl"))[0]
    old = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert all("summary_line" in rec for rec in old)
    new = [{("host_summary_row" if k == "summary_line" else k): v for k, v in rec.items()} for rec in old]
    (tmp_path / path.name).write_text("".join(json.dumps(rec) + "\n" for rec in old + new))
    runs, problems = load_history(str(tmp_path))
    assert problems == []
    assert len(runs) == 2 * len(old)


def test_releases_and_model_revisions_are_marked():
    runs, _problems = load_history(str(FIXTURES))
    labels = [m["label"] for m in markers(runs)]
    # first run, the upgrade to 0.5.13, and the rollback to 0.5.12.post1
    assert labels == ["SGLang 0.5.12.post1, model 0808b834305e", "SGLang 0.5.13", "SGLang 0.5.12.post1"]


def test_a_broken_line_is_a_problem_not_a_number(tmp_path):
    for path in FIXTURES.iterdir():
        shutil.copy(path, tmp_path)
    victim = next(tmp_path.glob("*0.5.13*.history.jsonl"))
    victim.write_text(victim.read_text() + '{"time": "2026-11-30T16:00:00+00:00"}\nnot json\n')
    runs, problems = load_history(str(tmp_path))
    assert len(runs) == 5
    assert len(problems) == 2
    assert all(victim.name in p for p in problems)


def _run_report_playbook(tmp_path, rc: int, **extra_vars):
    """playbooks/report.yml on a copy of the fixture records, the page to tmp_path/out; its run, rc checked."""
    data = tmp_path / "baselines"
    shutil.copytree(FIXTURES, data)
    return run_playbook(
        REPO / "playbooks" / "report.yml",
        inventory=REPO / "inventories" / "local",
        extra_vars={
            "throughput_gate_baseline_dir": str(data),
            "fleet_report_dest": str(tmp_path / "out" / "report.html"),
            **extra_vars,
        },
        timeout=300,
    ).expect(rc)


def _render_with_playbook(tmp_path) -> Path:
    proc = _run_report_playbook(tmp_path, 0)
    assert "wrote " in proc.stdout
    return tmp_path / "out" / "report.html"


def test_report_playbook_writes_a_self_contained_page(tmp_path):
    dest = _render_with_playbook(tmp_path)
    text = dest.read_text()
    parser = Tables()
    parser.feed(text)
    assert [img["id"] for img in parser.images] == ["chart-throughput", "chart-sweeps", "chart-power"]
    assert all(str(img["src"]).startswith("data:image/svg+xml;base64,") for img in parser.images)
    # self-contained: nothing is fetched from anywhere
    assert "http://" not in text.replace("http://www.w3.org", "")
    assert "https://" not in text


def test_a_failing_alert_read_still_fails_the_report(tmp_path):
    # report.yml counts only community.proxmox 2.0.0's connection crash as "not reached" (its rescue);
    # any other failure of the alert play, here a refused step, still fails the run with its own message
    proc = _run_report_playbook(tmp_path, 2, fleet_monitoring_alert_step_s="0")
    assert "fleet_monitoring_alert_step_s (0)" in proc.stdout


def test_chromium_renders_the_charts_without_console_errors(tmp_path):
    from playwright import sync_api  # noqa: PLC0415 - requirements-dev.txt; only this test drives a browser

    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: run tests/harness/setup-host.sh (Debian's chromium)"
    dest = _render_with_playbook(tmp_path)
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(dest.as_uri())
        page.wait_for_load_state("load")
        sizes = page.eval_on_selector_all("img", "els => els.map(e => [e.id, e.complete, e.naturalWidth])")
        shot = page.screenshot(full_page=True)
        browser.close()
    assert errors == []
    assert [s[0] for s in sizes] == ["chart-throughput", "chart-sweeps", "chart-power"]
    assert all(complete and width > 100 for _id, complete, width in sizes), sizes
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(shot) > 50_000  # a blank page of this size compresses to a few KiB


# ---- every record read defensively, every field escaped (issue 22) ----

TEMPLATE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "ul", "li", "img"}
TEMPLATE_TAGS |= {"table", "caption", "thead", "tbody", "tr", "th", "td"}
TEMPLATE_ATTRS = {"lang", "charset", "class", "id", "alt", "src"}
MARKUP = [
    "<script>alert(1)</script>",
    "</script><script>alert(2)</script>",
    '"><img src=x onerror=alert(3)>',
    "' onmouseover='alert(4)",
    "{{ lookup('pipe', 'id') }}",
    "</style><b>x</b>",
    "]]><svg onload=alert(5)>",
    "$\\frac{$",
    "&lt;amp;",
    "\x00\x0b\x1b[31m",
    "\ud800 lone surrogate",
]


class Structure(HTMLParser):
    """Every element and attribute of a page, to tell the template's from any that came from data."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    handle_startendtag = handle_starttag


def _assert_only_template_markup(page: str) -> None:
    structure = Structure()
    structure.feed(page)
    assert set(structure.tags) <= TEMPLATE_TAGS, set(structure.tags) - TEMPLATE_TAGS
    assert {name for name, _value in structure.attrs} <= TEMPLATE_ATTRS
    for name, value in structure.attrs:
        if name == "class":
            assert value in ("problems", "runs", "sweep", "coldstarts", "alerts")
        if name == "src":
            assert str(value).startswith("data:image/svg+xml;base64,")


def _fixture_record() -> dict:
    path = sorted(FIXTURES.glob("*.history.jsonl"))[0]
    return json.loads(path.read_text().splitlines()[0])


def _fixture_sweep() -> dict:
    (path,) = FIXTURES.glob("*.sweep.json")
    return json.loads(path.read_text())


def _page_of(directory: Path) -> tuple[str, list[dict], dict, list[str]]:
    runs, problems = load_history(str(directory))
    sweeps, sweep_problems = load_sweeps(str(directory))
    problems += sweep_problems
    page = render_html("t", "now", str(directory), runs=runs, sweeps=sweeps, charts={}, problems=problems)
    return page, runs, sweeps, problems


def test_sweep_fields_are_escaped_and_checked(tmp_path):
    # 'evaluated' went into the page unescaped
    sweep = dict(_fixture_sweep(), evaluated="<script>alert(1)</script>")
    (tmp_path / "a.sweep.json").write_text(json.dumps(sweep))
    page, _runs, sweeps, problems = _page_of(tmp_path)
    assert sweeps == {}
    assert problems == ["a.sweep.json: not a sweep record (field 'evaluated' is not a whole number)"]
    _assert_only_template_markup(page)


def test_markup_in_every_text_field_stays_text(tmp_path):
    rec = _fixture_record()
    rec.update(host=MARKUP[0], verdict=MARKUP[1], reason=MARKUP[2])
    rec["key"] = dict(rec["key"], sglang_version=MARKUP[3], model_revision=MARKUP[4], profile=MARKUP[5])
    (tmp_path / "x.history.jsonl").write_text(json.dumps(rec) + "\n")
    sweep = _fixture_sweep()
    sweep["key"] = dict(sweep["key"], host=MARKUP[6])
    sweep["time"] = "2026-11-30T15:10:00+00:00"
    sweep["best"] = dict(sweep["best"], flags=MARKUP[1])
    sweep["candidates"][0].update(flags=MARKUP[0], status=MARKUP[2], verdict=MARKUP[3], reason=MARKUP[5])
    (tmp_path / "x.sweep.json").write_text(json.dumps(sweep))
    page, runs, sweeps, problems = _page_of(tmp_path)
    assert problems == []
    assert len(runs) == 1
    assert list(sweeps) == [MARKUP[6]]
    _assert_only_template_markup(page)
    parser = Tables()
    parser.feed(page)
    (table,) = parser.tables["runs"]
    assert table[1][0] == MARKUP[0]  # shown as the text it is


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"[1, 2]", "a list, not a mapping"),
        (b'"just text"', "a str, not a mapping"),
        (b'{"key": [], "time": "2026-11-30T16:00:00+00:00"}', "field 'key' is not a mapping"),
        (b"\xff\xfe not utf-8", "not JSON"),
        (b'{"median_output_tokens_per_s": NaN}', "not JSON"),
    ],
)
def test_a_malformed_history_line_is_a_named_problem(tmp_path, line, why):
    good = json.dumps(_fixture_record()).encode()
    (tmp_path / "h.history.jsonl").write_bytes(good + b"\n" + line + b"\n" + good + b"\n")
    page, runs, _sweeps, problems = _page_of(tmp_path)
    assert len(runs) == 2
    assert problems == [f"h.history.jsonl line 2: not a gate run record ({why})"]
    _assert_only_template_markup(page)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"time": "yesterday"}, "field 'time' is not an ISO 8601 time"),
        ({"time": "2026-11-30T16:00:00"}, "field 'time' has no UTC offset"),
        ({"median_output_tokens_per_s": "fast"}, "field 'median_output_tokens_per_s' is not a finite number"),
        ({"trials": 5}, "field 'trials' is not a list"),
        ({"telemetry": {"gpus": ["x"]}}, "field 'telemetry.gpus' is not a list of mappings"),
        ({"verdict": ["pass"]}, "field 'verdict' is not text"),
        ({"gpu_health": "degraded"}, "field 'gpu_health' is not a mapping"),
        ({"gpu_health": {"level": "sick", "verdict": "sick"}}, "field 'gpu_health.level' is not one of healthy,"),
        ({"gpu_health": {"level": "degraded"}}, "field 'gpu_health.verdict' is missing"),
        ({"gpu_health": {"level": "degraded", "verdict": 1}}, "field 'gpu_health.verdict' is not text"),
        (
            {"gpu_health": {"level": "healthy", "verdict": "failed: gpu 0: xid 79"}},
            "field 'gpu_health.verdict' does not start with its level",
        ),
    ],
)
def test_a_record_of_the_wrong_shape_is_a_named_problem(tmp_path, change, why):
    rec = dict(_fixture_record(), **change)
    (tmp_path / "h.history.jsonl").write_text(json.dumps(rec) + "\n")
    _page, runs, _sweeps, problems = _page_of(tmp_path)
    assert runs == []
    assert len(problems) == 1
    assert problems[0].startswith(f"h.history.jsonl line 1: not a gate run record ({why}")


def test_gpu_health_of_a_run_is_shown_as_text_and_absent_as_a_dash(tmp_path):
    verdict = "degraded: gpu 3: PCIe link Gen3 x8 (max Gen5 x16); <b>x</b>"
    rec = dict(_fixture_record(), gpu_health={"level": "degraded", "verdict": verdict})
    old = _fixture_record()
    old.pop("gpu_health", None)
    (tmp_path / "h.history.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(old) + "\n")
    page, _runs, _sweeps, problems = _page_of(tmp_path)
    assert problems == []
    _assert_only_template_markup(page)
    parser = Tables()
    parser.feed(page)
    (table,) = parser.tables["runs"]
    column = table[0].index("GPU health")
    assert [row[column] for row in table[1:]] == [verdict, "-"]


def test_a_bad_candidate_is_left_out_and_named_the_rest_shown(tmp_path):
    sweep = _fixture_sweep()
    total = len(sweep["candidates"])
    sweep["candidates"][1] = "not a candidate"
    sweep["candidates"][2] = dict(sweep["candidates"][2], reason=7)
    (tmp_path / "s.sweep.json").write_text(json.dumps(sweep))
    _page, _runs, sweeps, problems = _page_of(tmp_path)
    assert problems == [
        "s.sweep.json: candidate 2 left out (a str, not a mapping)",
        "s.sweep.json: candidate 3 left out (field 'reason' is not text)",
    ]
    assert len(sweeps) == 1
    only = next(iter(sweeps.values()))
    assert len(only["candidates"]) == total - 2


def test_a_symlink_out_of_the_directory_is_not_read(tmp_path):
    outside = tmp_path / "outside.history.jsonl"
    outside.write_text(json.dumps(_fixture_record()) + "\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "evil.history.jsonl").symlink_to(outside)
    runs, problems = load_history(str(data))
    assert runs == []
    assert len(problems) == 1
    assert problems[0].startswith("evil.history.jsonl: skipped: ")
    assert "symlink" in problems[0]


def test_control_characters_and_undecodable_names_are_shown_replaced(tmp_path):
    from ansible_collections.gpufleet.sglang.plugins.action.fleet_report import charts  # noqa: PLC0415

    rec = dict(_fixture_record(), host="node\x00\x0b\ud800")
    name = os.fsencode(str(tmp_path)) + b"/\xff.history.jsonl"  # not UTF-8: a surrogate in the str
    with open(name, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(rec) + "\n" + "not json\n")
    page, runs, _sweeps, problems = _page_of(tmp_path)
    assert len(runs) == 1
    assert len(problems) == 1
    page.encode("utf-8")  # a lone surrogate failed the write of the page
    assert "node\ufffd\ufffd\ufffd" in page
    _assert_only_template_markup(page)
    for uri in charts(runs, {}).values():
        _assert_plain_svg(uri)  # a control character made the SVG ill-formed


def test_a_file_name_with_a_control_character_is_skipped_and_named(tmp_path):
    (tmp_path / "a\x1b.history.jsonl").write_text(json.dumps(_fixture_record()) + "\n")
    runs, problems = load_history(str(tmp_path))
    assert runs == []
    assert len(problems) == 1
    assert "contains a control character" in problems[0]


def test_charts_draw_record_text_as_text(tmp_path):
    from ansible_collections.gpufleet.sglang.plugins.action.fleet_report import charts  # noqa: PLC0415

    rec = dict(_fixture_record(), host="$\\frac{$")
    (tmp_path / "h.history.jsonl").write_text(json.dumps(rec) + "\n")
    sweep = _fixture_sweep()
    sweep["candidates"][0]["flags"] = "$\\undefined{x}$"
    (tmp_path / "s.sweep.json").write_text(json.dumps(sweep))
    runs, _problems = load_history(str(tmp_path))
    sweeps, _sweep_problems = load_sweeps(str(tmp_path))
    pictures = charts(runs, sweeps)  # mathtext raised ValueError on these labels
    assert sorted(pictures) == ["power", "sweeps", "throughput"]
    for uri in pictures.values():
        _assert_plain_svg(uri)


markup_text = st.one_of(st.text(max_size=12), st.sampled_from(MARKUP))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), markup_text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(markup_text, inner, max_size=3)),
    max_leaves=6,
)
RECORD_FIELDS = ["host", "time", "key", "verdict", "reason", "failed", "median_output_tokens_per_s", "trials"]
RECORD_FIELDS += ["baseline_median", "delta_pct", "p_value", "telemetry", "gpu_health", "cold_start"]
RECORD_FIELDS += ["cold_start_problem"]
KEY_FIELDS = ["host", "sglang_version", "model", "model_revision", "profile", "gpu_model"]


@st.composite
def history_records(draw):
    """A real record with some fields (or key fields) replaced by anything, or anything at all."""
    if draw(st.integers(0, 4)) == 0:
        return draw(json_values)
    rec = _fixture_record()
    for field in draw(st.lists(st.sampled_from(RECORD_FIELDS), max_size=3)):
        rec[field] = draw(json_values)
    if isinstance(rec.get("key"), dict):
        for field in draw(st.lists(st.sampled_from(KEY_FIELDS), max_size=2)):
            rec["key"][field] = draw(markup_text if draw(st.booleans()) else json_values)
    return rec


@st.composite
def sweep_records(draw):
    if draw(st.integers(0, 4)) == 0:
        return draw(json_values)
    sweep = _fixture_sweep()
    for field in draw(st.lists(st.sampled_from(["key", "candidates", "time", "best", "evaluated"]), max_size=2)):
        sweep[field] = draw(json_values)
    if isinstance(sweep.get("key"), dict):
        sweep["key"]["host"] = draw(markup_text)
    if isinstance(sweep.get("candidates"), list) and sweep["candidates"]:
        index = draw(st.integers(0, len(sweep["candidates"]) - 1))
        sweep["candidates"][index] = draw(
            st.one_of(
                json_values,
                st.dictionaries(
                    st.sampled_from(
                        ["flags", "status", "verdict", "reason", "median_output_tokens_per_s", "p_vs_best"]
                    ),
                    json_values,
                ),
            )
        )
    return sweep


@given(st.lists(history_records(), max_size=4), st.lists(sweep_records(), max_size=2), st.binary(max_size=20))
def test_any_records_give_a_page_with_every_bad_record_named(tmp_path_factory, records, sweeps_in, junk):
    directory = tmp_path_factory.mktemp("report")
    lines = [json.dumps(rec).encode() for rec in records] + [junk.replace(b"\n", b" ")]
    (directory / "h.history.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    for index, sweep in enumerate(sweeps_in):
        (directory / f"s{index}.sweep.json").write_text(json.dumps(sweep))
    page, runs, sweeps, problems = _page_of(directory)  # never an exception
    non_blank = sum(1 for line in lines if line.strip())
    assert len(runs) + sum(1 for p in problems if p.startswith("h.history.jsonl line ")) == non_blank
    named = {p.split(":")[0] for p in problems if ": not a sweep record" in p}
    shown = {s["file"] for s in sweeps.values()}
    for index, sweep in enumerate(sweeps_in):
        name = f"s{index}.sweep.json"
        assert (name in named) != (name in shown) or (
            name not in named and sweep["key"]["host"] in sweeps  # an older sweep of a host shown
        )
    _assert_only_template_markup(page)
    parser = Tables()
    parser.feed(page)
    (table,) = parser.tables["runs"]
    assert [row[0] for row in table[1:]] == [display_text(r["host"]) for r in runs]  # data comes back as text
    page.encode("utf-8")  # what atomic_write does: no lone surrogate left


@settings(max_examples=examples(15))  # matplotlib draws three charts per example
@given(st.lists(history_records(), max_size=3), st.lists(sweep_records(), max_size=1))
def test_charts_of_any_records_never_raise(tmp_path_factory, records, sweeps_in):
    from ansible_collections.gpufleet.sglang.plugins.action.fleet_report import charts  # noqa: PLC0415

    directory = tmp_path_factory.mktemp("charts")
    (directory / "h.history.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in records))
    for index, sweep in enumerate(sweeps_in):
        (directory / f"s{index}.sweep.json").write_text(json.dumps(sweep))
    runs, _problems = load_history(str(directory))
    sweeps, _sweep_problems = load_sweeps(str(directory))
    pictures = charts(runs, sweeps)
    for uri in pictures.values():
        _assert_plain_svg(uri)


def _assert_plain_svg(uri: str) -> None:
    """Well-formed SVG without script, foreign content, event handlers or links (record text is drawn)."""
    prefix = "data:image/svg+xml;base64,"
    assert uri.startswith(prefix)
    root = ElementTree.fromstring(base64.b64decode(uri[len(prefix) :]))
    for element in root.iter():
        local = str(element.tag).rsplit("}", 1)[-1]
        assert local not in ("script", "foreignObject", "a", "iframe")
        for name in element.attrib:
            assert not name.rsplit("}", 1)[-1].lower().startswith("on")


# ---- cold starts beside the throughput (issue 23) ----

COLD_START = {
    "release": "0.5.23-abc",
    "sglang_version": "0.5.23",
    "ready_s": 312.44,
    "phases": {"load_weight": 41.25, "kv_cache_allocation": 3.5, "scheduler_e2e": 260.0, "tokenizer_e2e": 262.75},
    "cuda_graph": {"prefill": 0.0, "decode": 210.5, "draft_decode": 12.0},
}


def _cold_start_table(page: str) -> list[list[str]]:
    parser = Tables()
    parser.feed(page)
    (table,) = parser.tables["coldstarts"]
    return table


def test_cold_starts_are_shown_per_node_and_release(tmp_path):
    rec = dict(_fixture_record(), cold_start=COLD_START)
    old = _fixture_record()  # a run before cold starts were recorded: no row, no problem
    (tmp_path / "h.history.jsonl").write_text(json.dumps(old) + "\n" + json.dumps(rec) + "\n")
    page, runs, _sweeps, problems = _page_of(tmp_path)
    assert problems == []
    assert len(runs) == 2
    head, *rows = _cold_start_table(page)
    assert head == COLD_START_COLUMNS
    assert rows == [
        [
            rec["host"] or rec["key"]["host"],
            "0.5.23-abc",
            "0.5.23",
            rec["time"],
            "312.4",
            "41.2",
            "3.5",
            "260.0",
            "262.8",
            "222.5",
            "decode 210.5, draft_decode 12.0",
            str(rec["median_output_tokens_per_s"]),
        ]
    ]
    _assert_only_template_markup(page)


def test_cold_starts_come_next_to_the_throughput_chart():
    page = render_html(
        "t",
        "now",
        "d",
        runs=[],
        sweeps={},
        charts={"throughput": "data:image/svg+xml;base64,", "power": "data:image/svg+xml;base64,"},
        problems=[],
    )
    assert page.index('id="chart-throughput"') < page.index('class="coldstarts"') < page.index('id="chart-power"')


@pytest.mark.parametrize(
    ("cold_start", "why"),
    [
        ("fast", "cold_start is a str, not a mapping"),
        (dict(COLD_START, ready_s=-1), "cold_start.ready_s is negative"),
        (dict(COLD_START, ready_s=1e300), "cold_start.ready_s is more than"),
        (dict(COLD_START, phases={"<script>": 1.0}), "cold_start.phases has a phase name"),
        (dict(COLD_START, phases={}), "cold_start.phases is empty"),
        (dict(COLD_START, release=MARKUP[0] * 30), "cold_start.release is not text of 1 to 200"),
        ({k: v for k, v in COLD_START.items() if k != "release"}, "cold_start.release is missing"),
    ],
)
def test_a_cold_start_of_the_wrong_shape_is_a_problem_and_the_run_is_shown(tmp_path, cold_start, why):
    rec = dict(_fixture_record(), cold_start=cold_start)
    (tmp_path / "h.history.jsonl").write_text(json.dumps(rec) + "\n")
    page, runs, _sweeps, problems = _page_of(tmp_path)
    assert len(runs) == 1  # the throughput is still shown
    assert len(problems) == 1
    assert problems[0].startswith(f"cold start of h.history.jsonl line 1 not shown ({why}")
    assert _cold_start_table(page)[1:] == []
    _assert_only_template_markup(page)


def test_the_gates_own_cold_start_problem_is_listed(tmp_path):
    rec = dict(_fixture_record(), cold_start_problem=MARKUP[2] + "; left out")
    (tmp_path / "h.history.jsonl").write_text(json.dumps(rec) + "\n")
    page, runs, _sweeps, problems = _page_of(tmp_path)
    assert len(runs) == 1
    assert problems == [f"cold start of h.history.jsonl line 1 not shown (the gate left it out: {MARKUP[2]}; left out)"]
    _assert_only_template_markup(page)


def test_markup_in_cold_start_text_stays_text(tmp_path):
    rec = dict(_fixture_record(), cold_start=dict(COLD_START, release=MARKUP[1], sglang_version=MARKUP[3]))
    (tmp_path / "h.history.jsonl").write_text(json.dumps(rec) + "\n")
    page, _runs, _sweeps, problems = _page_of(tmp_path)
    assert problems == []
    _assert_only_template_markup(page)
    row = _cold_start_table(page)[1]
    assert row[1:3] == [MARKUP[1], MARKUP[3]]


def test_the_throughput_chart_marks_the_time_to_ready(tmp_path):
    from ansible_collections.gpufleet.sglang.plugins.action.fleet_report import charts  # noqa: PLC0415

    rec = dict(_fixture_record(), cold_start=COLD_START)
    (tmp_path / "h.history.jsonl").write_text(json.dumps(rec) + "\n")
    runs, _problems = load_history(str(tmp_path))
    uri = charts(runs, {})["throughput"]
    _assert_plain_svg(uri)
    assert b"ready in 312 s" in base64.b64decode(uri.split(",", 1)[1])


finite = st.floats(allow_nan=False, allow_infinity=False)  # what JSON can carry (the loader refuses NaN)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "release": markup_text,
            "sglang_version": markup_text,
            "ready_s": st.one_of(finite, st.integers(), markup_text),
            "phases": st.dictionaries(
                st.one_of(markup_text, st.sampled_from(["load_weight", "decode"])), st.one_of(finite, markup_text)
            ),
            "cuda_graph": st.one_of(
                markup_text, st.lists(finite), st.dictionaries(st.sampled_from(["decode", "prefill"]), finite)
            ),
        },
    )
)
def test_any_cold_start_is_shown_or_named_never_a_crash(tmp_path_factory, cold_start):
    directory = tmp_path_factory.mktemp("coldstart")
    rec = dict(_fixture_record(), cold_start=cold_start)
    (directory / "h.history.jsonl").write_text(json.dumps(rec) + "\n")
    page, runs, _sweeps, problems = _page_of(directory)
    assert len(runs) == 1  # the run is always shown
    shown = _cold_start_table(page)[1:]
    assert (len(shown), len(problems)) in ((1, 0), (0, 1))
    if problems:
        assert problems[0].startswith("cold start of h.history.jsonl line 1 not shown (cold_start")
    _assert_only_template_markup(page)
    page.encode("utf-8")


# ---- the alert history: Prometheus' ALERTS range query (a real answer of the lab's Prometheus 2.42) ----

ALERTS_FIXTURE = Path(__file__).parent / "fixtures" / "prometheus" / "alerts-query-range-2.42.json"


def test_alert_episodes_of_a_real_prometheus_answer():
    answer = json.loads(ALERTS_FIXTURE.read_text(encoding="utf-8"))
    episodes, problems = alert_episodes(answer, 15)
    assert problems == []
    series = answer["data"]["result"]
    # every series gives at least one episode; its first and last sample firing are the series' own
    assert {(e["alert"], e["node"]) for e in episodes} == {
        (s["metric"]["alertname"], s["metric"]["node"]) for s in series
    }
    for s in series:
        times = [v[0] for v in s["values"]]
        mine = [
            e
            for e in episodes
            if (e["alert"], e["node"]) == (s["metric"]["alertname"], s["metric"]["node"])
            and e["labels"]
            == ", ".join(
                f"{k}={v}"
                for k, v in sorted(s["metric"].items())
                if k not in ("__name__", "alertname", "alertstate", "node", "severity", "instance", "job")
            )
        ]
        assert min(e["start"] for e in mine) == min(times)
        assert max(e["end"] for e in mine) == max(times)
    gpu = next(e for e in episodes if e["alert"] == "GpufleetGpuFailed")
    assert "gpu=0" in gpu["labels"]
    assert "pci_bus_id=00000000:01:00.0" in gpu["labels"]
    assert gpu["severity"] == "critical"


def test_samples_further_apart_than_two_steps_are_separate_episodes():
    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"alertname": "A", "node": "n1"},
                    "values": [[100, "1"], [160, "1"], [220, "1"], [1000, "1"]],
                }
            ],
        },
    }
    episodes, problems = alert_episodes(answer, 60)
    assert problems == []
    assert [(e["start"], e["end"]) for e in episodes] == [(100.0, 220.0), (1000.0, 1000.0)]
    assert alert_rows(episodes)[0][-1] == "2.0"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"status": "error", "error": "bad_data: <script>"}, "alert history: Prometheus did not answer with success"),
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, "is not a range query's matrix"),
        (
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": []}]}},
            "series 0: no alertname label",
        ),
        (
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"alertname": 1}}]}},
            "series 0: 'metric' is not a mapping of label names to text",
        ),
        (
            {
                "status": "success",
                "data": {
                    "resultType": "matrix",
                    "result": [{"metric": {"alertname": "A"}, "values": [[float("nan"), "1"]]}],
                },
            },
            "series 0: a point's time is not a Unix time",
        ),
        (
            {
                "status": "success",
                "data": {"resultType": "matrix", "result": [{"metric": {"alertname": "A"}, "values": [[1, 1]]}]},
            },
            'series 0: a point is not [time, "value"]',
        ),
        ("not json at all", "alert history: Prometheus did not answer with success"),
    ],
)
def test_a_wrong_answer_is_a_named_problem(answer, problem):
    episodes, problems = alert_episodes(answer, 60)
    assert episodes == []
    assert len(problems) == 1
    assert problem in problems[0]


def test_alert_fields_are_escaped_on_the_page():
    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"alertname": "<img src=x onerror=alert(1)>", "node": 'n"1', "why": "</td><b>"},
                    "values": [[100, "1"]],
                }
            ],
        },
    }
    episodes, _problems = alert_episodes(answer, 60)
    page = render_html("t", "now", "src", runs=[], sweeps={}, charts={}, problems=[], alerts=episodes)
    _assert_only_template_markup(page)
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    parser = Tables()
    parser.feed(page)
    (table,) = parser.tables["alerts"]
    assert table[0] == ALERT_COLUMNS
    assert table[1][0] == "<img src=x onerror=alert(1)>"
    assert table[1][3] == "why=</td><b>"
    assert "No alert history" in render_html("t", "now", "src", runs=[], sweeps={}, charts={}, problems=[])


@given(
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
        max_leaves=30,
    )
)
def test_any_answer_gives_episodes_or_named_problems(answer):
    episodes, problems = alert_episodes({"status": "success", "data": {"resultType": "matrix", "result": [answer]}}, 60)
    assert all(p.startswith("alert history: ") for p in problems)
    for e in episodes:
        assert e["start"] <= e["end"]
