# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A reader of the Prometheus text exposition format for the tests of the textfiles the modules write
(gpu_health's, gate_metrics'), written here from the format's definition (Prometheus, "Exposition
formats": label values escape backslash, double quote and line feed), so a value that could end a
label or a line early shows as a wrong read-back. Import it as ``from lib.prometheus import parse``."""

from __future__ import annotations

import re

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?P<labels>\{.*\})? (?P<value>\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def unescape(text: str) -> str:
    return re.sub(r"\\([\\\"n])", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a text-format file; AssertionError on a line the format does not allow."""
    assert text.endswith("\n")
    samples, typed = [], set()
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if parts[1] == "TYPE":
                assert parts[3] == "gauge"
                typed.add(parts[2])
            continue
        match = SAMPLE.match(line)
        assert match, line
        labels: dict[str, str] = {}
        body = (match.group("labels") or "{}")[1:-1]
        pos = 0
        while pos < len(body):
            label = LABEL.match(body, pos)
            assert label, (line, pos)
            labels[label.group(1)] = unescape(label.group(2))
            pos = label.end()
        assert match.group("name") in typed
        samples.append((match.group("name"), labels, float(match.group("value"))))
    return samples
