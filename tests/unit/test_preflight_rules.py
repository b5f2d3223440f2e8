# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The preflights of roles fleet_monitoring and sglang_gateway: one task each for all their rules
(docs/connection.md, "Lever F"), which must still refuse every bad value with that rule's own message, name
every rule that fails at once, and pass the roles' defaults. fleet_monitoring's had no bad-input test before.

All cases run in one ``ansible-playbook`` run (a play per case, each in a block whose rescue writes the
message to a file): a run costs about a second of CPU before its first task (docs/test-hosts.md)."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from lib.playbook import recorded_case, run_playbook

TARGETS = [
    {"node": "node1", "url": "http://10.0.0.1:30000"},
    {"node": "node2", "url": "http://10.0.0.2:30000"},
    {"node": "node3", "url": "http://10.0.0.3:30000"},
]
MONITORING_GOOD = {
    "fleet_monitoring_sglang_targets": TARGETS,
    "fleet_monitoring_gateway_metrics_url": "http://10.0.0.9:29000/metrics",
}
GATEWAY_GOOD = {"sglang_gateway_worker_urls": [t["url"] for t in TARGETS], "sglang_gateway_api_key": ""}

# name -> (role, vars over the good ones, the messages' fragments expected; [] = passes)
CASES: dict[str, tuple[str, dict, list[str]]] = {
    "monitoring-good": ("fleet_monitoring", {}, []),
    "monitoring-no-targets": (
        "fleet_monitoring",
        {"fleet_monitoring_sglang_targets": [], "fleet_monitoring_gateway_host": ""},
        ["no SGLang node to scrape"],
    ),
    "monitoring-bad-url": (
        "fleet_monitoring",
        {"fleet_monitoring_sglang_targets": [*TARGETS[:2], {"node": "node3", "url": "http://10.0.0.3:30000/x y"}]},
        ["SGLang target", "10.0.0.3:30000/x y"],
    ),
    "monitoring-option-in-node": (
        "fleet_monitoring",
        {
            "fleet_monitoring_sglang_targets": [
                *TARGETS[:2],
                {"node": "node3 --web.enable-admin-api", "url": TARGETS[2]["url"]},
            ]
        },
        ["SGLang target", "--web.enable-admin-api"],
    ),
    "monitoring-mixed-scheme": (
        "fleet_monitoring",
        {"fleet_monitoring_sglang_targets": [*TARGETS[:2], {"node": "node3", "url": "https://10.0.0.3:30000"}]},
        ["SGLang target", "https://10.0.0.3:30000", "with the scheme of the others"],
    ),
    # (refused by the entry point's argument spec, before the rules: it names the variable and the type)
    "monitoring-not-a-mapping": (
        "fleet_monitoring",
        {"fleet_monitoring_sglang_targets": [*TARGETS[:2], "http://10.0.0.3:30000"]},
        ["fleet_monitoring_sglang_targets", "dict"],
    ),
    "monitoring-twice": (
        "fleet_monitoring",
        {"fleet_monitoring_sglang_targets": [*TARGETS, {"node": "node4", "url": TARGETS[0]["url"]}]},
        ["listed twice among the SGLang targets"],
    ),
    "monitoring-gateway-url": (
        "fleet_monitoring",
        {"fleet_monitoring_gateway_metrics_url": "http://10.0.0.9:29000/metrics\n- job_name: evil"},
        ["the gateway's metrics URL", "is not http(s)://<host>:<port>/<path>"],
    ),
    "monitoring-port-and-floor": (
        "fleet_monitoring",
        {"fleet_monitoring_prometheus_port": 70000, "fleet_monitoring_rollout_max_unavailable": 3},
        ["ports must be integers 1-65535", "got '3'", "floor (0) is at least 1"],
    ),
    "monitoring-two-rules-at-once": (
        "fleet_monitoring",
        {
            "fleet_monitoring_gateway_metrics_url": "ftp://10.0.0.9/metrics",
            "fleet_monitoring_retention": "15 days",
        },
        ["the gateway's metrics URL 'ftp://10.0.0.9/metrics'", "durations like 90s / 10m / 15d"],
    ),
    "gateway-good": ("sglang_gateway", {}, []),
    "gateway-policy-and-ports": (
        "sglang_gateway",
        {"sglang_gateway_policy": "fastest", "sglang_gateway_port": 70000, "sglang_gateway_metrics_port": 30001},
        ["unknown sglang_gateway_policy 'fastest'", "sglang_gateway_port = '70000' is not a TCP port"],
    ),
    "gateway-same-ports": (
        "sglang_gateway",
        {"sglang_gateway_port": 8080, "sglang_gateway_metrics_port": 8080},
        ["sglang_gateway_port and sglang_gateway_metrics_port are both 8080"],
    ),
    "gateway-bad-urls": (
        "sglang_gateway",
        {"sglang_gateway_worker_urls": ["http://10.0.0.1:30000", "10.0.0.2:30000", "http://10.0.0.3:30000/v1"]},
        ["worker URL '10.0.0.2:30000' is not", "worker URL 'http://10.0.0.3:30000/v1' is not"],
    ),
    "gateway-twice": (
        "sglang_gateway",
        {"sglang_gateway_worker_urls": ["http://10.0.0.1:30000", "http://10.0.0.1:30000"]},
        ["a worker URL is listed twice"],
    ),
    "gateway-state-dir-blank": (
        "sglang_gateway",
        {"sglang_gateway_state_dir": "/var/lib/sglang gateway"},
        ["state_dir an absolute path without blanks", "got '/var/lib/sglang gateway'"],
    ),
    "gateway-extra-args-key": (
        "sglang_gateway",
        {"sglang_gateway_extra_args": {"api_key": "x"}},
        ["must not\ncarry api_key".replace("\n", " ")],
    ),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("preflight")
    plays = []
    for name, (role, given, _expected) in CASES.items():
        good = MONITORING_GOOD if role == "fleet_monitoring" else GATEWAY_GOOD
        out = str(tmp / f"{name}.json")
        plays.append(
            {
                "name": name,
                "hosts": "localhost",
                "gather_facts": False,
                "vars": {**good, **given},
                "tasks": [
                    recorded_case(
                        name,
                        [
                            {
                                "name": "Preflight",
                                "ansible.builtin.include_role": {
                                    "name": f"gpufleet.sglang.{role}",
                                    "tasks_from": "preflight",
                                },
                            }
                        ],
                        out,
                    )
                ],
            }
        )
    (tmp / "play.yml").write_text(yaml.safe_dump(plays, sort_keys=False), encoding="utf-8")
    inv = {
        "all": {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    }
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inv), encoding="utf-8")
    run_playbook(tmp / "play.yml", inventory=tmp / "hosts.yml", timeout=300).expect(0)
    return {name: json.loads((tmp / f"{name}.json").read_text(encoding="utf-8")) for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_refuses_with_its_message_and_the_defaults_pass(outcomes, name):
    expected = CASES[name][2]
    got = outcomes[name]
    if not expected:
        assert got == {"failed": False}, got
        return
    assert got["failed"], got
    # the one task of the rules failed (not a templating error in it, which names no rule), or the argument
    # spec before it, with every expected message
    assert got["task"].startswith(("Check the", "Validating arguments against arg spec")), got
    assert "Task failed" not in got["msg"], got
    for fragment in expected:
        assert fragment in got["msg"], (fragment, got["msg"])


def test_a_rule_that_holds_says_nothing(outcomes):
    """Only the failing rules speak: a bad port names the ports' rule and not the targets' or the gateway's."""
    msg = outcomes["monitoring-port-and-floor"]["msg"]
    for other in ("SGLang target", "metrics URL", "listed twice"):
        assert other not in msg, (other, msg)
    msg = outcomes["gateway-same-ports"]["msg"]
    for other in ("worker URL", "policy", "health-check"):
        assert other not in msg, (other, msg)
