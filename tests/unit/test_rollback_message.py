# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The failed rollout's message (filter rollback_message, module_utils/fleet/rollback_message.py), which was
a 21-line template in playbooks/tasks/rollback.yml. The wording is the template's: checked once
against it on all 1,536 combinations of the facts when it moved (whitespace folded as YAML's ``>-``
folded it); the cases below pin each branch."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.filter.rollback_message import rollback_message_filter
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollback_message import (
    ACTIONS,
    RollbackMessageError,
    one_line,
    rollback_message,
)

BASE = {"host": "gpu-1", "what": "throughput gate FAIL (slow)"}
RESTORE = {"current": "d-aa", "changed": True, "files_changed": ["/etc/sglang/s.yaml", "/etc/systemd/system/s.service"]}
NOW = {"release_dir": "/opt/sglang/releases/0.5.22"}
DONE = dict(BASE, action="rolled_back", restore=RESTORE, now=NOW, version="0.5.22", restarted=True)


def test_nothing_had_changed():
    message = rollback_message(dict(BASE, action="none", out_of_gateway=True))
    assert message == (
        "gpu-1: throughput gate FAIL (slow). Nothing had changed on the node (no deployment recorded before this "
        "run and none now); it was left as it was and is OUT of the gateway."
    )


def test_could_not_go_back_and_stopped():
    facts = dict(BASE, action="rolled_back", restore_error="disk full", restore_left="on deployment d-bb")
    assert rollback_message(facts).endswith(
        "It could not go back (disk full): the node is left on deployment d-bb, STOPPED and OUT of the gateway."
    )


def test_a_stop_that_failed_is_said_not_hidden():
    """rollback.yml's stop had failed_when: false and the message said STOPPED regardless."""
    facts = dict(BASE, action="rolled_back", restore_error="disk full", stop_error="Unit not loaded")
    message = rollback_message(facts)
    assert "STOPPED and" not in message
    assert "NOT STOPPED (stopping it failed: Unit not loaded; it may still serve the new deployment)" in message


def test_restored_with_nothing_changed():
    facts = dict(DONE, action="restored", restore=dict(RESTORE, changed=False), out_of_gateway=True)
    assert rollback_message(facts).endswith(
        "Nothing on the node had changed: it runs deployment d-aa (SGLang 0.5.22, release "
        "/opt/sglang/releases/0.5.22) as before and is OUT of the gateway."
    )


def test_rolled_back_verified_and_back_in_the_gateway():
    facts = dict(DONE, serving_after_s=41.5, verified="PASS at 10 tok/s", via_gateway=True, out_of_gateway=False)
    assert rollback_message(facts).endswith(
        "Rolled back to deployment d-aa (SGLang 0.5.22, release /opt/sglang/releases/0.5.22; files restored: "
        "s.yaml, s.service). It serves again (41.5 s after the failure), verified: gate PASS at 10 tok/s, back in "
        "the gateway."
    )


def test_a_failed_gpu_keeps_the_rolled_back_node_out():
    facts = dict(DONE, out_of_gateway=True, via_gateway=True, gpu_failed=True, gpu_verdict="failed: gpu 2: Xid 79")
    message = rollback_message(facts)
    assert message.endswith(
        "It serves again but is OUT of the gateway and stays out: GPU health failed: gpu 2: Xid 79 "
        "(docs/gpu-health.md; once the GPU is repaired, run the rollout again)."
    )
    assert "back in the gateway" not in message


def test_a_failed_gpu_never_taken_out_is_said_to_be_in_the_gateway():
    facts = dict(DONE, out_of_gateway=False, via_gateway=True, gpu_failed=True, gpu_verdict="failed: gpu 0 missing")
    assert rollback_message(facts).endswith(
        "It was never taken out of the gateway and is still IN it: the gateway stops routing to it when its "
        "health checks fail."
    )


def test_restored_before_a_restart_and_not_serving():
    facts = dict(DONE, action="restored", restarted=False, verify_error="not ready: 503", out_of_gateway=True)
    assert rollback_message(facts).endswith(
        "Restored deployment d-aa (SGLang 0.5.22, release /opt/sglang/releases/0.5.22; files restored: s.yaml, "
        "s.service); the server was never restarted on the new one and kept serving this one. It is NOT serving "
        "as it should (not ready: 503) and is OUT of the gateway."
    )


def test_a_gateway_error_is_named():
    facts = dict(DONE, restore=dict(RESTORE, files_changed=[]), gateway_error="add_worker: 502")
    assert rollback_message(facts).endswith(
        "files restored: none). It serves again but is OUT of the gateway (add_worker: 502)."
    )


def test_a_reason_cannot_start_a_line_of_its_own():
    facts = dict(BASE, action="rolled_back", restore_error="x\ngpu-2: all good.\r\x1b[2K\u2028")
    message = rollback_message(facts)
    assert "\n" not in message
    assert "It could not go back (x gpu-2: all good. [2K): the node" in message


@pytest.mark.parametrize(
    ("facts", "needle"),
    [
        ("gpu-1 failed", "expected a dict of the rollback's facts, got str"),
        (dict(BASE, action="none", colour="red"), "unknown field(s) colour; known: host, what, action"),
        ({"what": "x", "action": "none"}, "host is required"),
        (dict(BASE, action="undo"), "action must be one of none, restored, rolled_back, got 'undo'"),
        (dict(BASE, action="none", out_of_gateway="yes"), "out_of_gateway must be bool, got str"),
        (dict(BASE, action="none", restore_error=True), "restore_error must be str, got bool"),
        (dict(BASE, action="none", restore=["d-aa"]), "restore must be dict, got list"),
    ],
)
def test_wrong_facts_are_named(facts, needle):
    with pytest.raises(
        AnsibleFilterError, match=f"^rollback_message: {needle.replace('(', '[(]').replace(')', '[)]')}"
    ):
        rollback_message_filter(facts)


def test_a_null_field_counts_as_left_out():
    assert rollback_message(dict(BASE, action="none", restore_error=None, out_of_gateway=None)) == rollback_message(
        dict(BASE, action="none")
    )


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
OPTIONAL = st.fixed_dictionaries(
    {},
    optional={
        "out_of_gateway": st.booleans(),
        "restarted": st.booleans(),
        "via_gateway": st.booleans(),
        "restore": st.fixed_dictionaries(
            {"current": TEXT, "changed": st.booleans(), "files_changed": st.lists(TEXT, max_size=3)}
        ),
        "now": st.fixed_dictionaries({"release_dir": TEXT}),
        "version": TEXT,
        "restore_error": TEXT,
        "restore_left": TEXT,
        "stop_error": TEXT,
        "verify_error": TEXT,
        "serving_after_s": st.floats(min_value=0, max_value=1e6, allow_nan=False) | TEXT,
        "verified": TEXT,
        "gateway_error": TEXT,
    },
)


@given(host=TEXT, what=TEXT, action=st.sampled_from(ACTIONS), optional=OPTIONAL)
def test_any_facts_give_one_line_naming_the_host_and_every_reason_shown(host, what, action, optional):
    facts = dict(optional, host=host, what=what, action=action)
    message = rollback_message(facts)
    assert message == one_line(message)  # one line, no control characters, no doubled spaces
    assert not any(ch in message for ch in "\n\r\x1b\u2028\u2029\x85")
    assert message.startswith(f"{one_line(host)}: {one_line(what)}.")
    if action != "none" and "restore_error" in facts:
        assert f"It could not go back ({one_line(facts['restore_error'])})" in message
        assert ("NOT STOPPED" in message) is ("stop_error" in facts)


@given(
    facts=st.dictionaries(
        st.sampled_from(["host", "what", "action", "restore", "verified", "x"]), TEXT | st.booleans() | st.none()
    )
)
def test_any_mapping_is_a_message_or_a_named_error(facts):
    try:
        message = rollback_message(facts)
    except RollbackMessageError as exc:
        message = str(exc)
        assert message.startswith("rollback_message: ")
    assert isinstance(message, str)
