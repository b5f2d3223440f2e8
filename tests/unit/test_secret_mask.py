# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""secret_mask: which strings are secrets, every form they take in a message, and masking a nested
result (used by the throughput_gate module on the target and by its action plugin on the controller)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import (
    MASK,
    mask,
    mask_url,
    secret_forms,
    secrets_of,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import runner as gate_runner


def test_secrets_of_url_and_key():
    found = secrets_of("http://admin:pa%40ss@10.0.0.5:30000", "k3y")
    assert "k3y" in found
    assert "pa%40ss" in found
    assert "pa@ss" in found
    assert secrets_of("http://10.0.0.5:30000", None) == []
    assert secrets_of("http://[::1", "") == []


def test_mask_covers_escaped_forms_everywhere():
    key = 'se"cr\r\net\\x'
    secrets = secrets_of("http://u:p%2Fw@h:1", key)
    text = json.dumps({"k": key})
    result = {
        "msg": f"bad key {key!r} and raw {key}",
        "nested": [{"json": text, "twice": json.dumps(text)}],
        "plan": {"url": "http://u:p%2Fw@h:1/generate", "decoded": "p/w"},
        "n": 5,
    }
    masked = json.dumps(mask(result, secrets))
    for form in (key, repr(key)[1:-1], json.dumps(key)[1:-1], "p%2Fw", "p/w", "\\r\\n"):
        assert form not in masked, form
    assert "cr" not in masked.replace("********", "")
    assert '"n": 5' in masked


def test_mask_keeps_structure_with_a_short_key():
    masked = mask({"verdict": "pass", "reason": "regression", "failed": False, "msg": "pass: x"}, ["ss"])
    assert masked == {"verdict": "pass", "reason": "regression", "failed": False, "msg": "pa********: x"}
    # free text under the same name (an accept reason) is masked
    assert mask({"accepted": {"reason": "key ss leaked"}}, ["ss"]) == {"accepted": {"reason": "key ******** leaked"}}


def test_the_module_masks_the_forms_of_the_same_secrets_as_the_action_plugin():
    p = gate_runner.GateParams(url="http://u:pa%40ss@h:1", api_key="k3y-secret")
    assert gate_runner.secrets(p) == secret_forms(secrets_of(p.url, p.api_key))
    assert {"k3y-secret", "pa%40ss", "pa@ss", "u:pa%40ss"} <= set(gate_runner.secrets(p))


def test_no_secret_leaves_the_value_as_it_is():
    value = {"msg": "nothing to hide", "list": ("a", 1)}
    assert mask(value, []) is value
    assert mask(value, [""]) is value
    assert secrets_of(None, None) == []


def test_forms_longest_first_and_stable():
    forms = secret_forms(["a\nbcdefgh", "k"])
    assert forms == sorted(forms, key=lambda f: (-len(f), f))
    assert forms == secret_forms(["k", "a\nbcdefgh"])
    assert "a\\nbcdefgh" in forms  # escaped
    assert "bcdefgh" in forms  # the piece after the control character (>= MIN_SECRET_PART)
    assert "a" not in forms  # a shorter piece is not masked on its own


def test_text_keys_are_masked_names_and_enum_values_kept():
    key = "plain-secret-key"
    out = mask({key: 1, "passed": key, "verdict": "fail", "reason": f"see {key}"}, ["ss", key])
    assert out == {MASK: 1, "passed": MASK, "verdict": "fail", "reason": f"see {MASK}"}


def test_url_user_info_and_password_are_masked_but_mask_url_keeps_the_user():
    url = "http://admin:pa%40ss@10.0.0.5:30000/generate"
    secrets = secrets_of(url, None)
    shown = mask_url(url)
    assert shown == "http://admin:********@10.0.0.5:30000/generate"
    assert mask({"msg": f"GET {shown}", "raw": url, "decoded": "pa@ss"}, secrets) == {
        "msg": f"GET {shown}",
        "raw": "http://********@10.0.0.5:30000/generate",
        "decoded": MASK,
    }


@pytest.mark.parametrize("key", ["t\u00e9st-unicode-secret", 'quote"and\\backslash-secret'])
def test_tuples_and_nested_messages(key):
    text = json.dumps({"msg": json.dumps({"k": key})})
    out = mask(("x", [text, {"inner": (key,)}]), [key])
    assert out == ["x", [out[1][0], {"inner": [MASK]}]]
    assert "secret" not in json.dumps(out)
