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
| `demo_facts_source` | `other_facts` | facts |

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
            {
                "readme": README.replace("| `demo_facts_source` | `other_facts` | facts |\n", "").replace(
                    "`demo_facts_source` defaults", "It defaults"
                )
            },
            "does not mention `demo_facts_source`",
        ),
        (
            {"readme": README.replace("| `demo_hosts` | `[a]` | hosts |\n", "") + "`demo_hosts` lists hosts.\n"},
            "roles/demo/README.md: the variable table has no row for `demo_hosts` (an option of entry point main",
        ),
        (
            {
                "readme": README.replace(
                    "| `demo_port` | `8000` | port |", "| `demo_port` | `8000` | port |\n| `demo_old` | `1` | x |"
                )
            },
            "the variable table has a row for `demo_old`, which is not an option in roles/demo/meta/argument_specs.yml",
        ),
        ({"readme": README + "Set `demo_prot`.\n"}, "names `demo_prot`, which is no option"),
    ],
)
def test_each_drift_is_named(tmp_path: Path, kwargs: dict[str, str], message: str) -> None:
    found = errors(make_role(tmp_path, **kwargs))
    assert any(message in e for e in found), found


def test_a_row_may_name_options_by_suffix(tmp_path: Path) -> None:
    """`demo_port` / `_hosts` is the row of both (as `throughput_gate_tolerance` / `_alpha`)."""
    readme = README.replace("| `demo_hosts` | `[a]` | hosts |\n", "").replace(
        "| `demo_port` | `8000` | port |", "| `demo_port` / `_hosts` | `8000` / `[a]` | port / hosts |"
    )
    assert errors(make_role(tmp_path, readme=readme)) == []


def test_prose_only_readme_needs_no_table(tmp_path: Path) -> None:
    """Without a variable table the README only has to mention every option."""
    readme = "# demo\n\n`demo_port`, `demo_hosts` and `demo_facts_source` (default `other_facts`).\n"
    assert errors(make_role(tmp_path, readme=readme)) == []


def test_repository_roles_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """`make role-docs` on the roles as they are."""
    assert role_docs.main(["check"]) == 0, capsys.readouterr().err


def test_generated_section_round_trip(tmp_path: Path) -> None:
    marked = README + "\n" + role_docs.BEGIN + "\n" + role_docs.END + "\n"
    role = make_role(tmp_path, readme=marked)
    assert any("variable table differs" in e for e in errors(role))
    assert role_docs.main(["write", "--roles-dir", str(tmp_path), "demo"]) == 0
    text = (role / "README.md").read_text()
    assert "| `demo_port` | int | `8000` | Port `demo` listens on. |" in text
    assert errors(role) == []


# --------------------------------------------------------------------------- options left to a module

MODULE = {
    "port": {"type": "int", "default": 8000},
    "timeout": {"type": "float", "default": 30},
    "retries": {"type": "int"},
}
MODULE_SPEC = (
    SPEC
    + """      demo_timeout:
        type: float
        default: 30
        description: Left to the module.
      demo_retries:
        type: int
        description: Left to the module, which has no default.
"""
)
MODULE_README = README.replace(
    "| `demo_facts_source` | `other_facts` | facts |\n",
    "| `demo_facts_source` | `other_facts` | facts |\n| `demo_timeout` | `30` | the module's |\n"
    "| `demo_retries` | | the module's |\n",
)


def module_errors(role: Path) -> list[str]:
    loaded = role_docs.load_role(role)
    loaded.module = role_docs.ModuleSpec("demo_", MODULE, "demo module spec")
    return role_docs.check_specs(loaded) + role_docs.check_module_defaults(loaded) + role_docs.check_readme(loaded)


def test_an_option_left_to_the_module_needs_no_role_default(tmp_path: Path) -> None:
    # demo_port and demo_timeout are the module's: the spec states their defaults, defaults/main.yml leaves them out
    defaults = DEFAULTS.replace("demo_port: 8000\n", "")
    assert module_errors(make_role(tmp_path, MODULE_SPEC, defaults, MODULE_README)) == []


@pytest.mark.parametrize(("default", "errors"), [(30, 0), (60, 1)])
def test_a_role_option_may_name_a_module_option_by_another_word(tmp_path: Path, default: int, errors: int) -> None:
    # demo_wait_s is the module's timeout under the role's own word (MODULE_OPTION_NAMES)
    spec = MODULE_SPEC.replace("demo_timeout:", "demo_wait_s:").replace(
        "        default: 30\n", f"        default: {default}\n"
    )
    readme = MODULE_README.replace("`demo_timeout` | `30`", f"`demo_wait_s` | `{default}`")
    defaults = DEFAULTS.replace("demo_port: 8000\n", "")
    loaded = role_docs.load_role(make_role(tmp_path, spec, defaults, readme))
    loaded.module = role_docs.ModuleSpec("demo_", MODULE, "demo module spec", {"demo_wait_s": "timeout"})
    found = role_docs.check_specs(loaded) + role_docs.check_module_defaults(loaded) + role_docs.check_readme(loaded)
    assert len(found) == errors, found
    assert all("module's default is 30" in e for e in found)


@pytest.mark.parametrize(
    ("spec", "defaults", "message"),
    [
        (
            MODULE_SPEC.replace("        default: 30\n", "        default: 60\n"),
            "",
            "main.demo_timeout says default 60, the module's default is 30 (demo module spec)",
        ),
        (
            MODULE_SPEC.replace("        default: 30\n", ""),
            "",
            "main.demo_timeout does not state the module's default 30",
        ),
        (
            MODULE_SPEC.replace(
                "        type: int\n        description: Left",
                "        type: int\n        default: 3\n        description: Left",
            ),
            "",
            "main.demo_retries says default 3, but the module option retries has none",
        ),
        (MODULE_SPEC, "demo_port: 8000\n", "demo_port restates the module's default 8000"),
    ],
)
def test_a_module_default_restated_or_contradicted_is_named(
    tmp_path: Path, spec: str, defaults: str, message: str
) -> None:
    base = DEFAULTS.replace("demo_port: 8000\n", "")
    found = module_errors(make_role(tmp_path, spec, base + defaults, MODULE_README))
    assert any(message in e for e in found), found


def test_throughput_gate_role_states_the_modules_defaults(tmp_path: Path) -> None:
    real = REPO / "roles" / "throughput_gate"
    assert role_docs.check_module_defaults(role_docs.load_role(real)) == []
    # a copy whose spec says another tolerance than the module's fails the check
    copy = tmp_path / "throughput_gate"
    for rel in ("meta/argument_specs.yml", "defaults/main.yml", "README.md", "tasks/main.yml"):
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text((real / rel).read_text())
    spec = copy / "meta" / "argument_specs.yml"
    text = spec.read_text()
    old = "      throughput_gate_tolerance:\n        type: float\n        default: 0.10\n"
    assert old in text
    spec.write_text(text.replace(old, old.replace("0.10", "0.2")))
    found = role_docs.check_module_defaults(role_docs.load_role(copy))
    assert any("main.throughput_gate_tolerance says default 0.2, the module's default is 0.1" in e for e in found), (
        found
    )
    # and so does a defaults/main.yml that restates a module default
    (copy / "defaults" / "main.yml").write_text(
        (real / "defaults" / "main.yml").read_text() + "throughput_gate_trials: 5\n"
    )
    found = role_docs.check_module_defaults(role_docs.load_role(copy))
    assert any("throughput_gate_trials restates the module's default 5" in e for e in found), found


def with_dependency(tmp_path: Path, shared: str) -> Path:
    """demo, with an option shared_root whose default comes from its meta dependency `common`."""
    common = tmp_path / "common"
    (common / "defaults").mkdir(parents=True)
    (common / "defaults" / "main.yml").write_text(f"---\nshared_root: {shared}\n")
    spec = SPEC + "      shared_root:\n        type: path\n        default: /opt/shared\n        description: Root.\n"
    role = make_role(
        tmp_path,
        spec=spec,
        readme=README.replace(
            "| `demo_facts_source` | `other_facts` | facts |\n",
            "| `demo_facts_source` | `other_facts` | facts |\n| `shared_root` | `/opt/shared` | root |\n",
        ),
    )
    (role / "meta" / "main.yml").write_text("---\ndependencies:\n  - role: gpufleet.sglang.common\n")
    return role


def test_default_from_a_meta_dependency_counts(tmp_path: Path) -> None:
    assert errors(with_dependency(tmp_path, "/opt/shared")) == []


def test_default_from_a_meta_dependency_must_agree(tmp_path: Path) -> None:
    found = errors(with_dependency(tmp_path, "/srv/shared"))
    assert any('main.shared_root says default "/opt/shared", a meta dependency' in e for e in found), found


def test_every_tasks_from_of_the_collection_names_a_declared_entry_point() -> None:
    assert role_docs.tasks_from_errors(REPO) == []


@pytest.mark.parametrize(
    ("tasks_from", "fails"),
    [("facts", False), ("main", False), ("model", True), ("facts.yml", True), ("{{ entry }}", False)],
)
def test_a_tasks_from_that_names_no_declared_entry_point_is_named(tmp_path: Path, tasks_from: str, fails: bool) -> None:
    spec = SPEC + "  facts:\n    short_description: Facts\n    options: {}\n"
    make_role(tmp_path / "roles", spec=spec)
    play = tmp_path / "playbooks" / "play.yml"
    play.parent.mkdir()
    play.write_text(
        "---\n- name: A play\n  hosts: all\n  tasks:\n    - name: In a block\n      block:\n"
        "        - name: Include\n          ansible.builtin.include_role:\n"
        f'            name: gpufleet.sglang.demo\n            tasks_from: "{tasks_from}"\n'
    )
    found = role_docs.tasks_from_errors(tmp_path)
    if fails:
        assert found == [
            f"playbooks/play.yml: tasks_from {tasks_from} of role demo is not an entry point of "
            "roles/demo/meta/argument_specs.yml (declared: main, facts); declare it there, "
            "or name a declared one (without .yml)"
        ]
    else:
        assert found == []
