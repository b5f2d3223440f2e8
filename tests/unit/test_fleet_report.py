# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report: the numbers in its tables are those of the files (real lab gate history and a
sweep, tests/unit/fixtures/report/); playbooks/report.yml writes the page; headless Chromium
renders it with its three charts and no console error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet_report import (
    RUN_COLUMNS,
    SWEEP_COLUMNS,
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


def _render_with_playbook(tmp_path) -> Path:
    data = tmp_path / "baselines"
    shutil.copytree(FIXTURES, data)
    dest = tmp_path / "out" / "report.html"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(REPO / "inventories" / "local"),
            str(REPO / "playbooks" / "report.yml"),
            "-e",
            f"throughput_gate_baseline_dir={data}",
            "-e",
            f"fleet_report_dest={dest}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "wrote " in proc.stdout
    return dest


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
