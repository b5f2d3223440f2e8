"""tune.yml interrupted like an operator's Ctrl-C: ansible-playbook gets SIGINT while a candidate runs.

Ansible runs no `always:` section on an interrupt, so the node is left on the candidate with the
sweep journal; the next tune.yml must restore the recorded options file byte for byte first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import testinfra.utils.ansible_runner

# through testinfra's podman backend (one `podman exec` per command), not one Ansible run per command
testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
]

REPO = Path(__file__).resolve().parents[4]  # extensions/molecule/sglang_server/tests/ -> the repository
JOURNAL = "/opt/sglang/tune-journal.json"
CONFIG = "/etc/sglang/sglang-server.yaml"


def _tune(*extra: str) -> subprocess.Popen:
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    return subprocess.Popen(
        ["ansible-playbook", "-i", inventory, str(REPO / "playbooks" / "tune.yml"), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, signalled as a terminal's Ctrl-C would be
    )


def test_sigint_mid_sweep_then_the_next_run_restores(host):
    assert (REPO / "playbooks" / "tune.yml").is_file(), f"no playbooks/tune.yml under {REPO}"
    before = host.file(CONFIG).sha256sum
    sweep = _tune()
    try:
        deadline = time.monotonic() + 300
        state = {}
        while time.monotonic() < deadline and sweep.poll() is None:
            f = host.file(JOURNAL)
            if f.exists:
                state = json.loads(f.content_string)
                # the journal is written before the options file: wait for both
                if state.get("state") == "candidate" and host.file(CONFIG).sha256sum != before:
                    break
            time.sleep(0.5)
        assert state.get("state") == "candidate", "the sweep never switched to a candidate"
        os.killpg(sweep.pid, signal.SIGINT)
        out = sweep.communicate(timeout=120)[0]
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.communicate(timeout=60)
    assert sweep.returncode != 0, out[-3000:]
    # left behind: the journal names the candidate; the candidate's options are live
    left = json.loads(host.file(JOURNAL).content_string)
    assert left["candidate"] == state["candidate"]
    assert host.file(CONFIG).sha256sum != before

    again = _tune("-e", '{"sglang_tune_space": {"attention_backend": ["flashinfer"]}}')
    out = again.communicate(timeout=600)[0]
    assert again.returncode == 0, out[-5000:]
    assert f"(candidate {state['candidate']})" in out
    assert not host.file(JOURNAL).exists
    assert host.file(CONFIG).sha256sum == before
    assert host.file(CONFIG).mode == 0o600
    assert host.service("sglang-server").is_running
