# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared pieces of the modules' argument specs (module_utils/common/arg_spec.py): a list-of-dicts
option is the entry the modules node_state, lxc_gpu_config and sglang_deployment spelled out, and
AnsibleModule's own checks treat it so."""

from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.arg_spec import dict_list


def test_the_entry_as_spelled_out_before():
    assert dict_list(
        path={"type": "path", "required": True},
        secret={"type": "bool", "default": False},
    ) == {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {"path": {"type": "path", "required": True}, "secret": {"type": "bool", "default": False}},
    }


def test_the_sub_options_keep_their_order():
    assert list(dict_list(b={"type": "str"}, a={"type": "str"})["options"]) == ["b", "a"]


def test_each_entry_has_its_own_default_list():
    one, two = dict_list(a={"type": "str"}), dict_list(a={"type": "str"})
    assert one["default"] == []
    assert one["default"] is not two["default"]


def test_ansible_checks_each_dict_against_the_sub_options():
    spec = {"files": dict_list(path={"type": "path", "required": True}, secret={"type": "bool", "default": False})}
    result = ArgumentSpecValidator(spec).validate({"files": [{"path": "/etc/x"}]})
    assert result.error_messages == []
    assert result.validated_parameters["files"] == [{"path": "/etc/x", "secret": False}]
    assert ArgumentSpecValidator(spec).validate({}).validated_parameters["files"] == []
    assert ArgumentSpecValidator(spec).validate({"files": [{"secret": True}]}).error_messages
