# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TESTS ONLY: a cache of the Python code that ansible-core's Jinja environment compiles templates to.

ansible-core compiles every template and conditional it evaluates from its source (Jinja's lexer,
parser, code generator and Python's ``compile``), and keeps nothing: most templating happens in the
worker that ``ansible-playbook`` forks for each task and host, and the worker exits afterwards. So
the same few hundred templates of the collection's roles are compiled again in every worker of every
run. On the lab's no-op converge that was about a fifth of the controller's user CPU (docs/test-hosts.md).

Loaded by ``tests/harness/pycache_site/sitecustomize.py`` into the Pythons the unit and integration
suites start and into the molecule scenarios' controllers (``extensions/molecule/config.yml``), it
wraps ``AnsibleEnvironment.compile`` (a template given as a string) and ``compile_expression`` (a
conditional or bare expression) when ansible-core's templating module is first imported. The code
object of a compiled template is kept in ``CACHE_DIR`` under the sha256 of what decides it: the
Python, Jinja and ansible-core versions, the environment's syntax and code-generation settings, the
kind of compile, the source, and the name and file name it is compiled under. A later compile of the
same key loads it instead (``Template.from_code``, what Jinja's own bytecode cache does for file
templates). Anything unexpected (a damaged entry, an unwritable directory, a template debug session,
an ansible-core without these names) takes ansible-core's own path.

It relies on ansible-core's private templating classes, and the generated code also depends on
whether each filter or test a template names takes Jinja's context (its ``pass_context`` mark): a
plugin that gains or loses that mark between two runs needs the cache cleared. That is acceptable for
a test harness that runs one checkout's plugins, and it is why the product never installs it: the
simulated lab and ``benchmarks/noop_bench.py`` run ansible-core as users do.

The directory is the module payload cache's (``GPUFLEET_TEST_PYCACHE_DIR``) ``jinja`` subdirectory,
under the same rule: a link, or a directory owned by another user or writable by group or others, is
neither read nor written. ``GPUFLEET_TEST_JINJA_CACHE=0`` turns it off (for side-by-side figures).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import sys

TARGET = "ansible._internal._templating._jinja_bits"
FORMAT = "1"  # bump when what a key covers changes


def cache_dir() -> str:
    """Where entries live: ``$GPUFLEET_TEST_PYCACHE_DIR/jinja``."""
    return os.path.join(os.environ.get("GPUFLEET_TEST_PYCACHE_DIR", "/var/cache/gpufleet-test-pycache"), "jinja")


def _pycache_module():
    """tests/harness/ansiballz_pycache.py (its directory rule is this cache's): the copy sitecustomize
    loaded, else one loaded under another name (which installs nothing)."""
    loaded = sys.modules.get("gpufleet_test_pycache")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(
        "gpufleet_test_pycache_rules", os.path.join(os.path.dirname(os.path.abspath(__file__)), "ansiballz_pycache.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


trusted_dir = _pycache_module().trusted_dir


def ready_dir(path: str) -> bool:
    """``path`` made (mode 0700) under a trusted parent if missing; True when it can be used."""
    if not trusted_dir(os.path.dirname(path)):
        return False
    with contextlib.suppress(FileExistsError, OSError):
        os.mkdir(path, 0o700)
    return trusted_dir(path)


def cache_key(versions: tuple, settings: tuple, kind: str, source: str, *more: object) -> str:
    """The entry's name: the same only for the same versions, environment settings, kind, source and
    compile arguments."""
    parts = (FORMAT, repr(versions), repr(settings), kind, source, repr(more))
    return hashlib.sha256(b"\0".join(p.encode("utf-8", "surrogatepass") for p in parts)).hexdigest()


def load(path: str):
    """The code object kept at ``path``, or None (missing, damaged, not code)."""
    try:
        with open(path, "rb") as fh:
            code = marshal.load(fh)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, type(cache_key.__code__)) else None


def store(path: str, code) -> None:
    """Write ``code`` at ``path`` whole or not at all (a read-only directory: nothing kept)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            marshal.dump(code, fh)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def install(jinja_bits) -> bool:
    """Wrap ``jinja_bits.AnsibleEnvironment``'s two compile entry points (once). False when this
    ansible-core lacks what the wrappers rely on, or the cache is off or has no usable directory."""
    env_cls = getattr(jinja_bits, "AnsibleEnvironment", None)
    fields = getattr(jinja_bits, "_TEMPLATE_OVERRIDE_FIELD_NAMES", None)
    smuggling = getattr(jinja_bits, "_CompileStateSmugglingCtx", None)
    if env_cls is None or fields is None or smuggling is None or "_gpufleet_codecache" in env_cls.__dict__:
        return False
    if os.environ.get("GPUFLEET_TEST_JINJA_CACHE", "1") == "0" or not ready_dir(cache_dir()):
        return False
    import ansible  # noqa: PLC0415 (imported by now: jinja_bits is ansible-core's)
    import jinja2  # noqa: PLC0415
    from jinja2 import nodes  # noqa: PLC0415
    from jinja2.environment import TemplateExpression  # noqa: PLC0415
    from jinja2.parser import Parser  # noqa: PLC0415

    versions = (sys.version, jinja2.__version__, ansible.__version__)
    own_compile = env_cls.compile
    own_expression = env_cls.compile_expression

    def settings(env) -> tuple:
        names = (*fields, "trim_blocks", "lstrip_blocks", "keep_trailing_newline", "newline_sequence")
        names += ("optimized", "is_async", "autoescape", "code_generator_class", "template_class")
        extensions = tuple(sorted(env.extensions))
        return (type(env).__module__, type(env).__qualname__, extensions, *(repr(getattr(env, n)) for n in names))

    def cached(env, key: str, build):
        where = cache_dir()
        if not trusted_dir(where):
            return build()
        path = os.path.join(where, key)
        code = load(path)
        if code is None:
            code = build()
            store(path, code)
        return code

    def compile(self, source, name=None, filename=None, raw=False, defer_init=False):  # noqa: PLR0917 (Jinja's signature)
        if raw or not isinstance(source, str) or smuggling.current(optional=True) or self._debuggable_template_source:
            return own_compile(self, source, name, filename, raw, defer_init)
        key = cache_key(versions, settings(self), "template", str(source), name, filename, defer_init)
        return cached(self, key, lambda: own_compile(self, source, name, filename, raw, defer_init))

    def compile_expression(self, source, undefined_to_none=True):
        if not isinstance(source, str) or self._debuggable_template_source:
            return own_expression(self, source, undefined_to_none)

        def build():
            parser = Parser(self, source, state="variable")
            expr = parser.parse_expression()
            if not parser.stream.eos:
                raise ValueError("chunk after expression")
            expr.set_environment(self)
            body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
            return own_compile(self, nodes.Template(body, lineno=1))

        try:
            code = cached(self, cache_key(versions, settings(self), "expression", str(source)), build)
        except Exception:  # a syntax error and the like: ansible-core's own path raises what it raises
            return own_expression(self, source, undefined_to_none)
        template = self.template_class.from_code(self, code, self.make_globals(None), None)
        return TemplateExpression(template, undefined_to_none)

    env_cls.compile = compile
    env_cls.compile_expression = compile_expression
    env_cls._gpufleet_codecache = (own_compile, own_expression)
    return True


def uninstall(jinja_bits) -> None:
    """Put ansible-core's own compile entry points back (the unit tests install and remove it)."""
    env_cls = jinja_bits.AnsibleEnvironment
    own = env_cls.__dict__.get("_gpufleet_codecache")
    if own is not None:
        env_cls.compile, env_cls.compile_expression = own
        del env_cls._gpufleet_codecache


class _WhenImported(importlib.abc.MetaPathFinder):
    """Installs the cache right after ansible-core's templating module is imported, if it ever is."""

    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        own_exec = spec.loader.exec_module

        def exec_module(module):
            own_exec(module)
            with contextlib.suppress(Exception):  # never in the way of ansible-core itself
                install(module)

        spec.loader.exec_module = exec_module
        return spec


def hook() -> None:
    """Arrange the install (``sitecustomize`` calls this); at once if ansible-core is already loaded."""
    if TARGET in sys.modules:
        with contextlib.suppress(Exception):
            install(sys.modules[TARGET])
    elif not any(isinstance(f, _WhenImported) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenImported())
