"""Filter gpufleet.sglang.retired_names: the retired variable names a play still sets, as one phrase."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.filter.retired_names import FilterModule, retired_names

RETIRED = {"role_old_a": "role_new_a", "role_old_b": "role_new_b"}


def test_none_set_is_empty():
    assert retired_names(RETIRED, {"role_new_a": 1, "other": 2}) == ""


def test_one_set_names_it_and_its_new_name():
    assert retired_names(RETIRED, {"role_old_b": ""}) == "role_old_b retired: rename to role_new_b"


def test_several_in_the_order_of_the_retired_map():
    got = retired_names(RETIRED, {"role_old_b": 1, "role_old_a": 2})
    assert got == "role_old_a, role_old_b retired: rename to role_new_a, role_new_b"


def test_a_name_set_to_none_still_counts():
    # an inventory line `role_old_a:` (null) is still the old name in use
    assert retired_names(RETIRED, {"role_old_a": None}).startswith("role_old_a retired")


def test_not_a_dict_is_named():
    with pytest.raises(AnsibleFilterError, match="retired_names: expected a dict of old to new names, got list"):
        retired_names(["role_old_a"], {})  # type: ignore[arg-type]


def test_registered():
    assert FilterModule().filters()["retired_names"] is retired_names
