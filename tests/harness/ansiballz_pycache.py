# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST HOSTS ONLY: a bytecode cache for the Python that Ansible's modules bring to a test host.

Every module Ansible runs arrives as an AnsiballZ payload: the module and the module_utils it imports,
zipped into ``<tmp>/ansible_<module>_payload.zip`` and imported from there by ``zipimport``, which
never writes bytecode. So every task compiles ``ansible.module_utils.basic`` and the rest from
source: on the Debian 12 test image about 130 of the 190 ms of CPU a ``ping`` costs. Python 3.11
and 3.13's ``zipimporter`` even compile each module twice (``get_filename`` compiles it to learn its
path, then ``load_module`` compiles it again).

Installed on a test host (``extensions/molecule/common/ssh_prepare.yml``: this file as
``gpufleet_test_pycache.py`` in ``/usr/lib/python3/dist-packages`` and a ``.pth`` line that imports
it), it puts a path hook before ``zipimport``'s, for payload archives only, whose importer compiles a
module once per host and source: the code object is kept in ``CACHE_DIR`` under the sha256 of the
Python version, the optimization level, the module's name and its source, and every later load gives
it the archive path of the run at hand (tracebacks name this run's payload, as without the cache).
Anything unexpected falls back to ``zipimport``'s own code path; a cache directory that is a link, or
owned by another user, or writable by group or others is neither read nor written. Nothing else is imported
differently: a path that is not an absolute ``..._payload.zip`` (or a directory inside one) gets
``zipimport`` as always.

The simulated lab does not install it: what ``benchmarks/noop_bench.py`` measures there is what real
nodes pay. Real nodes never carry it. docs/test-hosts.md says so.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import zipimport

CACHE_DIR = os.environ.get("GPUFLEET_TEST_PYCACHE_DIR", "/var/cache/gpufleet-test-pycache")
PAYLOAD = "_payload.zip"


def is_payload_path(path: object) -> bool:
    """True for an absolute path naming an AnsiballZ payload archive or a directory inside one."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        return False
    head, sep, rest = path.partition(PAYLOAD)
    return bool(sep) and head.rsplit("/", 1)[-1].startswith("ansible_") and rest[:1] in ("", "/")


def cache_key(fullname: str, source: str) -> str:
    """Where a module's code is kept: the same for the same interpreter, optimization level, name and source."""
    import hashlib  # noqa: PLC0415 (every Python on the host loads this file: only a payload pays for it)

    parts = (sys.version, str(sys.flags.optimize), fullname, source)
    return hashlib.sha256(b"\0".join(p.encode("utf-8", "surrogatepass") for p in parts)).hexdigest()


def trusted_dir(path: str) -> bool:
    """A cache directory whose entries may be loaded: a real directory (not a link), owned by root or
    this user, writable by no one else (an entry is code that runs as whoever imports it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid in (0, os.geteuid()) and not st.st_mode & 0o022


def with_filename(code, filename: str):
    """``code`` and every code object in it, naming ``filename`` (what compiling at that path gives)."""
    consts = tuple(with_filename(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


class CachingZipImporter(zipimport.zipimporter):
    """``zipimporter`` whose modules are compiled once per source (see the module's docstring)."""

    def get_filename(self, fullname):
        # what zipimport's own get_filename returns for a source module, without compiling it
        inner = self.prefix + fullname.rpartition(".")[2]
        inner += "/__init__.py" if self.is_package(fullname) else ".py"
        return self.archive + "/" + inner

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.get_code(module.__spec__.name), module.__dict__)

    def get_code(self, fullname):
        try:
            source = self.get_source(fullname)
            filename = self.get_filename(fullname)
        except Exception:  # zipimport's own path raises what it raises
            return super().get_code(fullname)
        if source is None:  # bytecode only in the archive: zipimport's own path
            return super().get_code(fullname)
        if not trusted_dir(CACHE_DIR):  # compiled once, kept nowhere
            return compile(source, filename, "exec", dont_inherit=True)
        import marshal  # noqa: PLC0415 (as hashlib above)

        path = os.path.join(CACHE_DIR, cache_key(fullname, source))
        try:
            with open(path, "rb") as fh:
                return with_filename(marshal.load(fh), filename)
        except (OSError, EOFError, ValueError, TypeError):
            pass  # not cached yet, unreadable or damaged: compile and (re)write it
        code = compile(source, filename, "exec", dont_inherit=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as fh:
                marshal.dump(code, fh)
            os.replace(tmp, path)
        except OSError:  # a read-only or foreign cache directory: compile every time, as without it
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return code


def path_hook(path):
    """The importer for a payload archive; ImportError (the next hook's turn) for any other path."""
    if not is_payload_path(path):
        raise ImportError("not an Ansible module payload")
    return CachingZipImporter(path)


def install() -> None:
    """Put the hook before zipimport's (once) and forget importers made before it for payload paths."""
    if path_hook not in sys.path_hooks:
        sys.path_hooks.insert(0, path_hook)
    for key in [k for k in sys.path_importer_cache if is_payload_path(k)]:
        del sys.path_importer_cache[key]


if __name__ == "gpufleet_test_pycache":  # imported by its .pth line on a test host
    install()
