# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/harness/jinja_codecache.py, the controllers' Jinja code cache in the test suites: templates and
expressions give exactly what ansible-core gives without it, cold and warm, in-process and through a
real ``ansible-playbook``; an entry is really loaded (not only written); a damaged entry is rebuilt;
a cache that is off, a link or writable by others is never used."""

from __future__ import annotations

import importlib
import importlib.util
import marshal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jinja2 import nodes
from jinja2.parser import Parser
from lib.playbook import run_playbook

HARNESS = Path(__file__).resolve().parents[1] / "harness"
_spec = importlib.util.spec_from_file_location("jinja_codecache_under_test", HARNESS / "jinja_codecache.py")
codecache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(codecache)


def names(code) -> set[str]:
    """Every name and constant string a code object and the code objects inside it use."""
    found = set(code.co_names) | {c for c in code.co_consts if isinstance(c, str)}
    for const in code.co_consts:
        if isinstance(const, type(code)):
            found |= names(const)
    return found


def entries(where: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(where.iterdir())} if where.is_dir() else {}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty trusted cache root for this test; the entries go to its ``jinja`` directory."""
    root = tmp_path / "pycache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("GPUFLEET_TEST_PYCACHE_DIR", str(root))
    monkeypatch.delenv("GPUFLEET_TEST_JINJA_CACHE", raising=False)
    return root / "jinja"


@pytest.fixture
def jinja_bits():
    """ansible-core's templating module, with ansible-core's own compile entry points after the test."""
    module = importlib.import_module(codecache.TARGET)
    yield module
    codecache.uninstall(module)


def render(source: str, expression: str, variables: dict) -> tuple:
    """What ansible-core makes of a template and an expression (or the error it raises, by type and text)."""
    from ansible.template import Templar, trust_as_template  # noqa: PLC0415 (imported where the test runs)

    templar = Templar(variables=variables)
    out = []
    for call, text in ((templar.template, source), (templar.evaluate_expression, expression)):
        try:
            out.append(("ok", repr(call(trust_as_template(text)))))
        except Exception as ex:  # the error is part of what must not change
            out.append((type(ex).__name__, str(ex)))
    return tuple(out)


VARS = {"items": [3, 1, 2], "name": "node-1", "n": 7, "flags": {"a": True, "b": False}}
ATOMS = st.sampled_from(
    ["items", "name", "n", "flags", "flags.a", "items[0]", "undefined_var", "'x'", "42", "[1, 2]", "none", "1 +"]
)
FILTERS = st.sampled_from(["", " | length", " | string", " | upper", " | sort", " | default('d')", " | int", " | bool"])
OPS = st.sampled_from([" == ", " != ", " > ", " ~ ", " in ", " and ", " or "])


@st.composite
def expressions(draw) -> str:
    left = draw(ATOMS) + draw(FILTERS)
    if draw(st.booleans()):
        return left
    return f"({left}){draw(OPS)}({draw(ATOMS)}{draw(FILTERS)})"


@given(expr=expressions(), text=st.text(alphabet="ab {}%#-\n", max_size=12))
def test_templates_and_expressions_give_what_ansible_core_gives_cold_and_warm(cache, jinja_bits, expr, text):
    source = f"{text}{{{{ {expr} }}}}{text}"
    codecache.uninstall(jinja_bits)
    expected = render(source, expr, VARS)
    assert codecache.install(jinja_bits)
    assert render(source, expr, VARS) == expected  # cold (or warm for an example drawn before)
    before = entries(cache)
    assert render(source, expr, VARS) == expected  # warm
    assert entries(cache) == before  # a warm run writes nothing


def test_an_entry_is_loaded_not_only_written(cache, jinja_bits):
    assert codecache.install(jinja_bits)
    assert render("{{ 'alpha' }}", "'alpha'", {}) == (("ok", "'alpha'"), ("ok", "'alpha'"))
    kept = entries(cache)
    assert len(kept) == 2  # the template and the expression
    env = jinja_bits.AnsibleEnvironment()
    own_compile = jinja_bits.AnsibleEnvironment._gpufleet_codecache[0]
    beta_template = own_compile(env, "beta")
    expr = Parser(env, "'beta'", state="variable").parse_expression()
    expr.set_environment(env)
    body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
    beta_expression = own_compile(env, nodes.Template(body, lineno=1))
    for name, data in kept.items():  # each entry replaced by code that gives 'beta' instead
        is_expression = "result" in names(marshal.loads(data))
        (cache / name).write_bytes(marshal.dumps(beta_expression if is_expression else beta_template))
    assert render("{{ 'alpha' }}", "'alpha'", {}) == (("ok", "'beta'"), ("ok", "'beta'"))


def test_a_damaged_entry_is_rebuilt(cache, jinja_bits):
    assert codecache.install(jinja_bits)
    expected = render("{{ items | sort | join('-') }}", "items | length > 2", VARS)
    for path in cache.iterdir():
        path.write_bytes(path.read_bytes()[:5])
    assert render("{{ items | sort | join('-') }}", "items | length > 2", VARS) == expected
    assert expected == (("ok", "'1-2-3'"), ("ok", "True"))
    assert all(codecache.load(str(p)) is not None for p in cache.iterdir())


@pytest.mark.parametrize("how", ["group-writable", "a link", "off"])
def test_a_cache_that_may_not_be_trusted_or_is_off_is_never_used(cache, jinja_bits, monkeypatch, tmp_path, how):
    root = cache.parent
    if how == "group-writable":
        root.chmod(0o770)
    elif how == "a link":
        real = tmp_path / "real"
        real.mkdir(mode=0o700)
        root.rmdir()
        root.symlink_to(real)
    else:
        monkeypatch.setenv("GPUFLEET_TEST_JINJA_CACHE", "0")
    assert codecache.install(jinja_bits) is False
    assert jinja_bits.AnsibleEnvironment.compile is not None
    assert "_gpufleet_codecache" not in jinja_bits.AnsibleEnvironment.__dict__
    assert not cache.exists() or not list(cache.iterdir())


def test_a_cache_directory_opened_to_others_after_install_is_neither_read_nor_written(cache, jinja_bits):
    assert codecache.install(jinja_bits)
    render("{{ 'alpha' }}", "'alpha'", {})
    env = jinja_bits.AnsibleEnvironment()
    poison = marshal.dumps(jinja_bits.AnsibleEnvironment._gpufleet_codecache[0](env, "poison"))
    for path in cache.iterdir():
        path.write_bytes(poison)
    cache.chmod(0o777)
    assert render("{{ 'alpha' }}", "'alpha'", {})[0] == ("ok", "'alpha'")
    assert render("{{ 'gamma' }}", "'gamma'", {}) == (("ok", "'gamma'"), ("ok", "'gamma'"))
    assert len(list(cache.iterdir())) == 2  # nothing written either


@given(
    parts=st.lists(st.text(max_size=8), min_size=4, max_size=4),
    which=st.integers(0, 3),
    other=st.text(max_size=8),
)
def test_the_key_changes_with_each_thing_it_covers(parts, which, other):
    versions, settings, kind, source = parts
    key = codecache.cache_key((versions,), (settings,), kind, source)
    assert key == codecache.cache_key((versions,), (settings,), kind, source)
    changed = list(parts)
    changed[which] = other
    same = changed == parts
    assert (codecache.cache_key((changed[0],), (changed[1],), changed[2], changed[3]) == key) == same


PLAY = """
- hosts: localhost
  gather_facts: false
  vars:
    items: [3, 1, 2]
    label: "{{ items | sort | map('string') | join('-') }}"
  tasks:
    - name: Loop, condition and filters
      ansible.builtin.debug:
        msg: "{{ item }}:{{ label }}:{{ (items | max) * item }}"
      loop: "{{ items | sort }}"
      when: item != 2 and label is string
    - name: A conditional with a syntax error
      ansible.builtin.debug:
        msg: never
      when: "items | length >"
"""


def test_a_real_playbook_prints_the_same_without_the_cache_cold_and_warm(cache, tmp_path):
    play = tmp_path / "play.yml"
    play.write_text(PLAY, encoding="utf-8")
    env = {"PYTHONPATH": str(HARNESS / "pycache_site"), "GPUFLEET_TEST_PYCACHE_DIR": str(cache.parent)}

    def run(**more) -> str:
        result = run_playbook(play, inventory="localhost,", env={**env, **more}, args=["-c", "local"]).expect(2)
        lines = result.stdout.splitlines()
        return "\n".join(line for line in lines if "msg" in line or "ERROR" in line or "fatal" in line)

    without = run(GPUFLEET_TEST_JINJA_CACHE="0")
    assert not cache.exists()
    assert "msg: 1:1-2-3:3" in without
    assert "msg: 3:1-2-3:9" in without
    assert "msg: 2:" not in without
    assert "Syntax error in expression" in without
    cold = run()
    kept = entries(cache)
    assert kept  # the cold run compiled and kept the play's templates
    warm = run()
    assert cold == without
    assert warm == without
    assert entries(cache) == kept  # the warm run loaded every one
