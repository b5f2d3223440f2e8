# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/sglang/vars/main.yml's __sglang_venv_platlib: the release venv's site-packages as the interpreter
probe (preflight.yml) printed them. The probe's answer is data from the node: rendered as Ansible renders
the role's var, any value gives either '' (install.yml then asks the venv's Python) or exactly
<release dir>/venv/lib[64]/pythonX.Y/site-packages, never a path with another segment, a dot segment, a
control character or anything outside the release's venv."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
EXPRESSION = yaml.safe_load((REPO / "roles" / "sglang" / "vars" / "main.yml").read_text(encoding="utf-8"))[
    "__sglang_venv_platlib"
]
RELEASE_DIR = "/opt/sglang/releases/sglang-0.5.23-0123456789"
ACCEPTED = re.compile(re.escape(RELEASE_DIR) + r"/venv/lib(64)?/python3\.[0-9]+/site-packages")


def render(probe: dict) -> str:
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415
    from ansible.template import Templar, trust_as_template  # noqa: PLC0415

    variables = {"__sglang_python_probe": probe, "__sglang_release_dir": RELEASE_DIR}
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(EXPRESSION))


@pytest.mark.parametrize("rel", ["lib/python3.11/site-packages", "lib64/python3.13/site-packages"])
def test_the_probes_plain_answer_is_taken(rel):
    assert render({"venv_platlib": rel}) == f"{RELEASE_DIR}/venv/{rel}"


@pytest.mark.parametrize(
    "probe",
    [
        {},
        {"venv_platlib": ""},
        {"venv_platlib": None},
        {"venv_platlib": 311},
        {"venv_platlib": ["lib/python3.11/site-packages"]},
        {"venv_platlib": "lib/python3.11/site-packages\n"},
        {"venv_platlib": "lib/python3.11/site-packages/../../../../etc"},
        {"venv_platlib": "../../../etc/python3.11/site-packages"},
        {"venv_platlib": "/usr/lib/python3.11/site-packages"},
        {"venv_platlib": "lib/python3.11/dist-packages"},
        {"venv_platlib": "local/lib/python3.11/site-packages"},
        {"venv_platlib": "lib/python3.11/site-packages\x00"},
        {"venv_platlib": "{{ lookup('env', 'HOME') }}"},
    ],
)
def test_anything_else_is_refused(probe):
    assert render(probe) == ""


_NEAR = st.builds(
    lambda a, b: a + "lib/python3.11/site-packages" + b,
    st.text(max_size=12),
    st.text(max_size=12),
)


@given(
    value=st.one_of(
        _NEAR,
        st.text(max_size=60),
        st.integers(),
        st.none(),
        st.lists(st.text(max_size=10), max_size=3),
        st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    )
)
def test_any_answer_gives_nothing_or_the_venvs_own_site_packages(value):
    got = render({"venv_platlib": value})
    assert isinstance(got, str)
    if got:
        assert ACCEPTED.fullmatch(got), got
        assert os.path.normpath(got) == got
        assert got.startswith(RELEASE_DIR + "/venv/")
