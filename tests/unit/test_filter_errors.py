# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How a filter reports what the pure code it wraps refused (plugins/plugin_utils/filter_errors.py): the
filter's name, then the error's message, as AnsibleFilterError without the error as its context; other
exceptions pass as they are. The filters that use it: rollout_order, rollout_serial, gateway_unavailable,
drain_budget, sglang_load."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.filter.rollout_order import rollout_order
from ansible_collections.gpufleet.sglang.plugins.filter.sglang_load import sglang_load
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import RolloutPlanError
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.filter_errors import filter_errors


def test_a_listed_error_becomes_the_filters_error_without_its_context():
    with pytest.raises(AnsibleFilterError) as caught, filter_errors("some_filter", RolloutPlanError):
        raise RolloutPlanError("bad input")
    assert str(caught.value) == "some_filter: bad input"
    assert caught.value.__suppress_context__
    assert caught.value.__cause__ is None


def test_any_of_several_listed_errors_is_translated():
    with pytest.raises(AnsibleFilterError, match=r"^f: 3$"), filter_errors("f", KeyError, ValueError):
        raise ValueError(3)


def test_an_error_not_listed_passes_as_it_is():
    with pytest.raises(TypeError, match="not mine"), filter_errors("f", RolloutPlanError):
        raise TypeError("not mine")


def test_no_error_no_change():
    with filter_errors("f", RolloutPlanError):
        value = 42
    assert value == 42


def test_the_filters_name_their_refusal():
    with pytest.raises(AnsibleFilterError, match=r"^rollout_order: "):
        rollout_order("not a list", [])
    with pytest.raises(AnsibleFilterError, match=r"^sglang_load: "):
        sglang_load(None)
