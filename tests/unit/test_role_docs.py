"""tools/role_docs/role_docs.py: README tables generated from the specs, a diff on drift, defaults against specs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
PROSE = "# demo\n\n`demo_facts_source` defaults to `other_facts`; the role publishes `demo_facts`.\n\n"
MARKED = PROSE + role_docs.BEGIN + "\n" + role_docs.END + "\n\n## Example\n\nAfter the tables.\n"
TASKS = """---
- name: Publish
  ansible.builtin.set_fact:
    demo_facts: {}
"""


def make_role(tmp_path: Path, spec: str = SPEC, defaults: str = DEFAULTS, readme: str | None = None) -> Path:
    """roles/demo under tmp_path; without ``readme``, README.md is MARKED filled by `write`."""
    role = tmp_path / "demo"
    for rel, text in {
        "meta/argument_specs.yml": spec,
        "defaults/main.yml": defaults,
        "README.md": MARKED if readme is None else readme,
        "tasks/main.yml": TASKS,
    }.items():
        (role / rel).parent.mkdir(parents=True, exist_ok=True)
        (role / rel).write_text(text)
    if readme is None:
        assert role_docs.main(["write", "--roles-dir", str(tmp_path), "demo"]) == 0
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
    ],
)
def test_a_default_that_differs_from_the_spec_is_named(tmp_path: Path, kwargs: dict[str, str], message: str) -> None:
    found = errors(make_role(tmp_path, **kwargs))
    assert any(message in e for e in found), found


def test_generated_tables(tmp_path: Path) -> None:
    text = (make_role(tmp_path) / "README.md").read_text()
    assert text.startswith(PROSE + role_docs.BEGIN)  # the prose around the markers is kept as it was
    assert text.endswith(role_docs.END + "\n\n## Example\n\nAfter the tables.\n")
    assert "| `demo_port` | int | `8000` | Port `demo` listens on. |" in text
    assert '| `demo_hosts` | list of str | `["a"]` | Hosts. |' in text
    assert "| `demo_facts_source` | dict |  | Default `other_facts`. |" in text


def test_a_readme_edited_by_hand_fails_check_with_a_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = make_role(tmp_path) / "README.md"
    readme.write_text(readme.read_text().replace("| `8000` | Port", "| `8080` | Port"))
    assert role_docs.main(["check", "--roles-dir", str(tmp_path), "demo"]) == 1
    err = capsys.readouterr().err
    assert "roles/demo/README.md: the variable tables differ from roles/demo/meta/argument_specs.yml" in err
    assert "role_docs.py write demo" in err
    assert "\n-| `demo_port` | int | `8080` | Port `demo` listens on. |\n" in err
    assert "\n+| `demo_port` | int | `8000` | Port `demo` listens on. |\n" in err
    # `write` puts it back
    assert role_docs.main(["write", "--roles-dir", str(tmp_path), "demo"]) == 0
    assert errors(readme.parent) == []


def test_a_spec_changed_without_write_fails_check(tmp_path: Path) -> None:
    role = make_role(tmp_path)
    spec = role / "meta" / "argument_specs.yml"
    spec.write_text(spec.read_text().replace("description: Hosts.", "description: Hosts to reach."))
    (found,) = errors(role)
    assert '\n-| `demo_hosts` | list of str | `["a"]` | Hosts. |' in found
    assert '\n+| `demo_hosts` | list of str | `["a"]` | Hosts to reach. |' in found


@pytest.mark.parametrize(
    "readme",
    [
        "# demo\n\n| variable | default |\n|---|---|\n| `demo_port` | `8000` |\n",  # a hand-written table
        PROSE + role_docs.BEGIN + "\n",  # no end marker
        PROSE + role_docs.END + "\n" + role_docs.BEGIN + "\n",  # the end before the begin
    ],
)
def test_a_readme_without_the_markers_fails(tmp_path: Path, readme: str) -> None:
    role = make_role(tmp_path, readme=readme)
    message = f"roles/demo/README.md has no '{role_docs.BEGIN}' ... '{role_docs.END}' section"
    assert any(message in e for e in errors(role)), errors(role)
    assert role_docs.main(["write", "--roles-dir", str(tmp_path), "demo"]) == 1
    assert (role / "README.md").read_text() == readme  # write leaves it alone


def test_repository_roles_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """`make role-docs` on the roles as they are."""
    assert role_docs.main(["check"]) == 0, capsys.readouterr().err


def test_cells_stay_cells(tmp_path: Path) -> None:
    """A `|` (a Jinja filter) or a line break in a spec does not end the cell or the row."""
    spec = SPEC.replace("description: Hosts.", "description: |-\n          Hosts | peers\n          of C(a|b).")
    spec = spec.replace("        type: dict\n", '        type: dict\n        default: "{{ x | default({}) }}"\n')
    text = (make_role(tmp_path, spec=spec) / "README.md").read_text()
    assert '| `["a"]` | Hosts \\| peers of `a\\|b`. |\n' in text
    assert "| dict | `{{ x \\| default({}) }}` | Default `other_facts`. |\n" in text


def cells(row: str) -> list[str]:
    """The cells of a table row as GitHub's Markdown splits it: a backslash escapes the next character."""
    assert row.startswith("| "), row
    assert row.endswith(" |"), row
    found, current, chars = [], "", iter(row[1:-1])
    for char in chars:
        if char == "\\":
            current += char + next(chars, "")
        elif char == "|":
            found.append(current)
            current = ""
        else:
            current += char
    return [*found, current]


@given(description=st.text(), default=st.text() | st.integers() | st.lists(st.text(max_size=5), max_size=3))
def test_any_spec_text_gives_one_row_of_four_cells(description: str, default: object) -> None:
    spec = {"main": {"options": {"demo_x": {"type": "str", "default": default, "description": description}}}}
    role = role_docs.Role("demo", Path("roles/demo"), {}, spec, MARKED)
    text = role_docs.rendered(role)
    assert text.startswith(PROSE)
    lines = text[len(PROSE) :].split("\n")
    row = lines[lines.index("|---|---|---|---|") + 1]
    assert lines[lines.index("|---|---|---|---|") + 2] == ""  # the row is one line
    assert len(cells(row)) == 4, row
    assert cells(row)[0] == " `demo_x` "
    role.readme = text
    assert role_docs.check_readme(role) == []


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


def module_errors(role: Path) -> list[str]:
    loaded = role_docs.load_role(role)
    loaded.module = role_docs.ModuleSpec("demo_", MODULE, "demo module spec")
    return role_docs.check_specs(loaded) + role_docs.check_module_defaults(loaded)


def test_an_option_left_to_the_module_needs_no_role_default(tmp_path: Path) -> None:
    # demo_port and demo_timeout are the module's: the spec states their defaults, defaults/main.yml leaves them out
    defaults = DEFAULTS.replace("demo_port: 8000\n", "")
    assert module_errors(make_role(tmp_path, MODULE_SPEC, defaults)) == []


@pytest.mark.parametrize(("default", "errors"), [(30, 0), (60, 1)])
def test_a_role_option_may_name_a_module_option_by_another_word(tmp_path: Path, default: int, errors: int) -> None:
    # demo_wait_s is the module's timeout under the role's own word (MODULE_OPTION_NAMES)
    spec = MODULE_SPEC.replace("demo_timeout:", "demo_wait_s:").replace(
        "        default: 30\n", f"        default: {default}\n"
    )
    defaults = DEFAULTS.replace("demo_port: 8000\n", "")
    loaded = role_docs.load_role(make_role(tmp_path, spec, defaults))
    loaded.module = role_docs.ModuleSpec("demo_", MODULE, "demo module spec", {"demo_wait_s": "timeout"})
    found = role_docs.check_specs(loaded) + role_docs.check_module_defaults(loaded)
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
    found = module_errors(make_role(tmp_path, spec, base + defaults))
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
    role = make_role(tmp_path, spec=spec)
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
