# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/harness/ansiballz_pycache.py, the test hosts' bytecode cache for Ansible module payloads: a
payload imports exactly as with zipimport alone (same modules, files, package paths, tracebacks that
name this run's archive, the same SyntaxError), a module is compiled once per source, a damaged or
unwritable cache changes nothing but the cost, and no other path is ever taken over."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

HOOK_FILE = Path(__file__).resolve().parents[1] / "harness" / "ansiballz_pycache.py"
_spec = importlib.util.spec_from_file_location("ansiballz_pycache_under_test", HOOK_FILE)
hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hook)

FILES = {
    "pkg/__init__.py": "VALUE = 1\n",
    "pkg/mod.py": "from pkg import sub\n\ndef fail():\n    raise RuntimeError('x')\n\nNAME = sub.NAME + '.mod'\n",
    "pkg/sub/__init__.py": "NAME = 'sub'\n",
    "broken.py": "def (:\n",
}

# what a payload run prints: where each module came from, its package path and a traceback's file
PROBE = """
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "hook":
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpufleet_test_pycache", sys.argv[3])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.install()
import pkg, pkg.mod, pkg.sub
try:
    pkg.mod.fail()
except RuntimeError as exc:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    tb = [where.filename, where.lineno, where.name]
try:
    import broken
    syntax = None
except SyntaxError as exc:
    syntax = [type(exc).__name__, exc.filename, exc.lineno]
print(json.dumps({
    "files": [pkg.__file__, pkg.mod.__file__, pkg.sub.__file__],
    "paths": [list(pkg.__path__), list(pkg.sub.__path__)],
    "name": pkg.mod.NAME, "value": pkg.VALUE, "traceback": tb, "syntax": syntax,
    "loader": type(pkg.mod.__loader__).__name__,
}))
"""


def payload(root: Path, run: str) -> Path:
    """A payload archive as AnsiballZ writes one: <tmp>/ansible_<module>_payload_<run>/ansible_<module>_payload.zip."""
    where = root / f"ansible_test.mod_payload_{run}"
    where.mkdir(parents=True)
    archive = where / "ansible_test.mod_payload.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, text in FILES.items():
            zf.writestr(name, text)
    return archive


def probe(archive: Path, cache: Path, use_hook: bool) -> dict:
    env = dict(os.environ, GPUFLEET_TEST_PYCACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)  # tests/conftest.py's site directory would load the hook into the plain run
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(archive), "hook" if use_hook else "plain", str(HOOK_FILE)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)


def test_a_payload_imports_as_with_zipimport_alone_and_a_second_run_comes_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    first = payload(tmp_path, "a")
    plain = probe(first, cache, use_hook=False)
    assert plain["loader"] == "zipimporter"
    assert not list(cache.iterdir()), "zipimport alone writes no bytecode"

    hooked = probe(first, cache, use_hook=True)
    assert hooked.pop("loader") == "CachingZipImporter"
    plain.pop("loader")
    assert hooked == plain
    kept = sorted(p.name for p in cache.iterdir())
    assert len(kept) == 3, kept  # pkg, pkg.mod, pkg.sub; nothing for the module that does not compile
    assert not any(name.endswith(".tmp") for name in kept)

    # the next run's archive lies elsewhere: the cached code names it, not the first run's
    second = payload(tmp_path, "b")
    again = probe(second, cache, use_hook=True)
    again.pop("loader")
    expected = probe(second, cache, use_hook=False)
    expected.pop("loader")
    assert again == expected
    assert str(first) not in json.dumps(again)
    assert sorted(p.name for p in cache.iterdir()) == kept


@pytest.fixture
def importer(tmp_path, monkeypatch):
    monkeypatch.setattr(hook, "CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    return hook.CachingZipImporter(str(payload(tmp_path, "x")))


def counting_compile(monkeypatch) -> list[str]:
    calls: list[str] = []

    def compile_(source, filename, mode, **kwargs):
        calls.append(filename)
        return compile(source, filename, mode, **kwargs)

    monkeypatch.setattr(hook, "compile", compile_, raising=False)
    return calls


def test_a_module_is_compiled_once_per_source(importer, monkeypatch):
    calls = counting_compile(monkeypatch)
    first = importer.get_code("pkg")
    assert importer.get_code("pkg") == first
    assert importer.get_filename("pkg") == f"{importer.archive}/pkg/__init__.py"
    assert calls == [f"{importer.archive}/pkg/__init__.py"]


def test_a_damaged_cache_entry_is_compiled_again_and_replaced(importer, monkeypatch, tmp_path):
    importer.get_code("pkg")
    (entry,) = (tmp_path / "cache").iterdir()
    entry.write_bytes(b"\x00not marshal data")
    calls = counting_compile(monkeypatch)
    namespace: dict = {}
    exec(importer.get_code("pkg"), namespace)
    assert namespace["VALUE"] == 1
    assert len(calls) == 1
    exec(importer.get_code("pkg"), namespace)
    assert len(calls) == 1, "the rewritten entry is read again"


def test_an_unwritable_cache_compiles_every_time_and_leaves_nothing(importer, monkeypatch, tmp_path):
    monkeypatch.setattr(hook, "CACHE_DIR", str(tmp_path / "no-such-dir"))
    calls = counting_compile(monkeypatch)
    namespace: dict = {}
    exec(importer.get_code("pkg"), namespace)
    exec(importer.get_code("pkg"), {})
    assert namespace["VALUE"] == 1
    assert len(calls) == 2
    assert not (tmp_path / "no-such-dir").exists()


@pytest.mark.parametrize("how", ["world-writable", "group-writable", "a link", "a file"])
def test_a_cache_directory_others_could_write_is_neither_read_nor_written(importer, monkeypatch, tmp_path, how):
    cache = tmp_path / "cache"
    importer.get_code("pkg")  # one good entry, written while the directory was safe
    (entry,) = cache.iterdir()
    if how == "world-writable":
        cache.chmod(0o777)
    elif how == "group-writable":
        cache.chmod(0o775)
    elif how == "a link":
        monkeypatch.setattr(hook, "CACHE_DIR", str(tmp_path / "link"))
        (tmp_path / "link").symlink_to(cache)
    else:
        monkeypatch.setattr(hook, "CACHE_DIR", str(entry))
    calls = counting_compile(monkeypatch)
    namespace: dict = {}
    exec(importer.get_code("pkg"), namespace)
    exec(importer.get_code("pkg"), {})
    assert namespace["VALUE"] == 1
    assert len(calls) == 2, "compiled at every load, the entry never read"
    assert list(cache.iterdir()) == [entry], "nothing written"


def test_the_same_source_under_another_interpreter_or_name_is_another_entry():
    assert hook.cache_key("a", "x = 1\n") == hook.cache_key("a", "x = 1\n")
    assert hook.cache_key("a", "x = 1\n") != hook.cache_key("b", "x = 1\n")
    assert hook.cache_key("a", "x = 1\n") != hook.cache_key("a", "x = 2\n")


@pytest.mark.parametrize(
    "path",
    [
        "/tmp/ansible_ansible.builtin.ping_payload_rv9yl5ny/ansible_ansible.builtin.ping_payload.zip",
        "/tmp/ansible_x_payload_1/ansible_x_payload.zip/ansible/module_utils",
    ],
)
def test_payload_paths_get_the_caching_importer(path):
    assert hook.is_payload_path(path)


@pytest.mark.parametrize(
    "path",
    [
        "",
        "relative/ansible_x_payload.zip",
        "/usr/lib/python3.11",
        "/srv/wheels/pkg.zip",
        "/tmp/other_payload.zip",
        "/tmp/ansible_x_payload.zipper",
        "/tmp/ansible_x_payload.zip\0/a",
        None,
    ],
)
def test_any_other_path_is_left_to_the_next_hook(path):
    assert not hook.is_payload_path(path)
    with pytest.raises(ImportError):
        hook.path_hook(path)


@given(st.text(max_size=80))
def test_the_hook_takes_over_only_absolute_payload_paths(path):
    taken = hook.is_payload_path(path)
    if taken:
        head, _sep, rest = path.partition(hook.PAYLOAD)
        assert path.startswith("/")
        assert head.rsplit("/", 1)[-1].startswith("ansible_")
        assert rest[:1] in ("", "/")
    elif "_payload.zip" not in path or not path.startswith("/"):
        with pytest.raises(ImportError):
            hook.path_hook(path)
