"""tools/role_docs/role_docs.py: finds each kind of drift between defaults, argument specs and README."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("role_docs", REPO / "tools" / "role_docs" / "role_docs.py")
assert _spec
assert _spec.loader
role_docs = importlib.util.module_from_spec(_spec)
sys.modules["role_docs"] = role_docs
_spec.loader.exec_module(role_docs)

SPEC = """---
argument_specs:
  main:
    short_description: A role
    options:
      demo_port:
        type: int
        default: 8000
        description: Port C(demo) listens on.
      demo_hosts:
        type: list
        elements: str
        default: [a]
        description: Hosts.
      demo_facts_source:
        type: dict
        description: Default C(other_facts).
"""
DEFAULTS = """---
demo_port: 8000
demo_hosts: [a]
demo_facts_source: "{{ other_facts | default({}) }}"
__demo_internal: 1
"""
README = """# demo

| variable | default | meaning |
|---|---|---|
| `demo_port` | `8000` | port |
| `demo_hosts` | `[a]` | hosts |

`demo_facts_source` defaults to `other_facts`; the role publishes `demo_facts`.
"""
TASKS = """---
- name: Publish
  ansible.builtin.set_fact:
    demo_facts: {}
"""


def make_role(tmp_path: Path, spec: str = SPEC, defaults: str = DEFAULTS, readme: str = README) -> Path:
    role = tmp_path / "demo"
    for rel, text in {
        "meta/argument_specs.yml": spec,
        "defaults/main.yml": defaults,
        "README.md": readme,
        "tasks/main.yml": TASKS,
    }.items():
        (role / rel).parent.mkdir(parents=True, exist_ok=True)
        (role / rel).write_text(text)
    return role


def errors(role: Path) -> list[str]:
    loaded = role_docs.load_role(role)
    return role_docs.check_specs(loaded) + role_docs.check_readme(loaded)


def test_agreeing_role_passes(tmp_path: Path) -> None:
    assert errors(make_role(tmp_path)) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"defaults": DEFAULTS.replace("8000", "9000")},
            "main.demo_port says default 8000, roles/demo/defaults/main.yml sets 9000",
        ),
        ({"defaults": DEFAULTS.replace("demo_port: 8000", 'demo_port: "8000"')}, "is type int"),
        ({"defaults": DEFAULTS + "demo_extra: 1\n"}, "demo_extra is not an option of any entry point"),
        ({"defaults": DEFAULTS.replace("demo_hosts: [a]\n", "")}, "does not set it"),
        (
            {"spec": SPEC.replace("        default: [a]\n", "")},
            'main.demo_hosts has no default, but roles/demo/defaults/main.yml sets ["a"]',
        ),
        (
            {"readme": README.replace("| `demo_port` | `8000` |", "| `demo_port` | `8080` |")},
            "the row of `demo_port` shows default `8080`",
        ),
        (
            {"readme": README.replace("`demo_facts_source` defaults", "It defaults")},
            "does not mention `demo_facts_source`",
        ),
        ({"readme": README + "Set `demo_prot`.\n"}, "names `demo_prot`, which is no option"),
    ],
)
def test_each_drift_is_named(tmp_path: Path, kwargs: dict[str, str], message: str) -> None:
    found = errors(make_role(tmp_path, **kwargs))
    assert any(message in e for e in found), found


def test_generated_section_round_trip(tmp_path: Path) -> None:
    marked = README + "\n" + role_docs.BEGIN + "\n" + role_docs.END + "\n"
    role = make_role(tmp_path, readme=marked)
    assert any("variable table differs" in e for e in errors(role))
    assert role_docs.main(["write", "--roles-dir", str(tmp_path), "demo"]) == 0
    text = (role / "README.md").read_text()
    assert "| `demo_port` | int | `8000` | Port `demo` listens on. |" in text
    assert errors(role) == []


def with_dependency(tmp_path: Path, shared: str) -> Path:
    """demo, with an option shared_root whose default comes from its meta dependency `common`."""
    common = tmp_path / "common"
    (common / "defaults").mkdir(parents=True)
    (common / "defaults" / "main.yml").write_text(f"---\nshared_root: {shared}\n")
    spec = SPEC + "      shared_root:\n        type: path\n        default: /opt/shared\n        description: Root.\n"
    role = make_role(tmp_path, spec=spec, readme=README + "Under `shared_root`.\n")
    (role / "meta" / "main.yml").write_text("---\ndependencies:\n  - role: gpufleet.sglang.common\n")
    return role


def test_default_from_a_meta_dependency_counts(tmp_path: Path) -> None:
    assert errors(with_dependency(tmp_path, "/opt/shared")) == []


def test_default_from_a_meta_dependency_must_agree(tmp_path: Path) -> None:
    found = errors(with_dependency(tmp_path, "/srv/shared"))
    assert any('main.shared_root says default "/opt/shared", a meta dependency' in e for e in found), found
