# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Callback plugin: loads connection plugins, and a collection's filter, test and lookup plugins, once in the
controller's main process, before any task runs."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load the container connections and the collection's filters once in the controller, not once per task
version_added: "0.1.0"
description:
  - Ansible runs each task of each host in a worker process forked from C(ansible-playbook). A connection plugin
    from a collection is loaded in that worker, and loading it parses the plugin's documentation (its options) into
    Ansible's configuration, because the main process never loaded it. For this collection's
    P(gpufleet.sglang.pct_ssh#connection), whose options are all of C(ansible.builtin.ssh)'s, that is about 25 ms of
    controller CPU for every task on a container (measured, docs/connection.md, "Lever E").
  - This callback loads the plugins named in O(connections) in the main process when the playbook starts, so every
    worker inherits their configuration and parses nothing. It changes no result, no option and no output.
  - A name that is not a connection plugin, or one that fails to load (for example
    P(gpufleet.sglang.pct_pipelined#connection) without paramiko), is a warning naming it; the run goes on and that
    plugin is loaded per task, as without this callback.
  - It also loads the filter, test and lookup plugins of the collections in O(collections) (this one by default) in
    the main process. A worker looks a collection's filter up by importing every filter file of the collection from
    its source, in each task whose templates use one (ansible-core 2.19 and 2.21; about 3 controller CPU s of the
    lab's no-op, docs/connection.md, "Lever H"). A name that is not a collection, a collection that is not
    installed, or a plugin file that fails to load is a warning naming it, and what it names is loaded per task.
  - Enable it in C(ansible.cfg) (C(callbacks_enabled = gpufleet.sglang.preload)), as this repository's does.
requirements:
  - enabled in C(callbacks_enabled)
options:
  connections:
    description:
      - The connection plugins to load, by fully qualified name.
      - Each one costs its loading once per run in the main process. P(gpufleet.sglang.pct_pipelined#connection)
        also imports paramiko there, once, as ansible-core 2.19 does by itself and 2.21 no longer does.
    type: list
    elements: str
    default: [gpufleet.sglang.pct_ssh]
    env:
      - name: GPUFLEET_PRELOAD_CONNECTIONS
    ini:
      - section: callback_gpufleet_preload
        key: connections
  collections:
    description:
      - The collections whose filter, test and lookup plugins are loaded in the main process, by name
        (C(namespace.name)); every worker inherits them.
      - Action plugins need nothing here, ansible-core loads them in the main process itself.
    type: list
    elements: str
    default: [gpufleet.sglang]
    env:
      - name: GPUFLEET_PRELOAD_COLLECTIONS
    ini:
      - section: callback_gpufleet_preload
        key: collections
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# callbacks_enabled = gpufleet.sglang.preload
#
# [callback_gpufleet_preload]
# connections = gpufleet.sglang.pct_ssh, gpufleet.sglang.pct_pipelined
"""

import pkgutil
import re
from functools import partial
from importlib import import_module

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import connection_loader, filter_loader, lookup_loader, test_loader

# a plugin name as a collection spells it: a short name, or namespace.collection.name
PLUGIN_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}\Z")


def load_problem(name: str, load, kind: str, label: str = "") -> str | None:
    """Load the ``kind`` plugin ``name`` with ``load``; the message saying why it could not be (``label`` after the
    name), or None where it loaded."""
    try:
        found = load(name)
    except Exception as exc:  # any failure here only costs speed: say it and go on
        return f"{name}{label} could not be loaded: {type(exc).__name__}: {exc}"
    return f"{name}: no {kind} plugin of that name" if found is None else None


def preload_problems(names: list, load) -> list[str]:
    """Load each connection plugin named in ``names`` with ``load`` (the loader's ``get``, class only); one message per
    name that is not a plugin name, that no plugin answers to or whose loading raised. Pure but for ``load``."""
    problems = []
    for name in names:
        if not isinstance(name, str) or not PLUGIN_NAME.match(name):
            problems.append(f"{name!r} is not a connection plugin name (namespace.collection.name)")
            continue
        if problem := load_problem(name, load, "connection"):
            problems.append(problem)
    return problems


# a collection's name as Galaxy spells it: namespace.name, lower case
COLLECTION_NAME = re.compile(r"\A[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*\Z")
# what a plugin file of each kind defines (Ansible's plugin contract): the class and its method that maps the names
# it answers to onto functions; a lookup file is one plugin, named after the file
JINJA_KINDS = {"filter": ("FilterModule", "filters"), "test": ("TestModule", "tests")}


def plugin_names(collection: str, kind: str, package) -> tuple[list[str], list[str]]:
    """The fully qualified names of the ``kind`` plugins (filter, test, lookup) that the files of ``package`` (the
    collection's plugin package, imported) define, and one message per file that could not be read. Imports each
    filter and test file: the main process keeps them for the workers."""
    names, problems = [], []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.ispkg or info.name.startswith("_"):
            continue
        if kind not in JINJA_KINDS:
            names.append(f"{collection}.{info.name}")
            continue
        cls_name, method = JINJA_KINDS[kind]
        try:
            module = import_module(f"{package.__name__}.{info.name}")
            names.extend(f"{collection}.{name}" for name in getattr(getattr(module, cls_name)(), method)())
        except Exception as exc:  # any failure here only costs speed: say it and go on with the other files
            problems.append(f"{collection}.{info.name} ({kind} file) could not be loaded: {type(exc).__name__}: {exc}")
    return names, problems


def preload_collection_problems(collections: list, loaders) -> list[str]:
    """Load every filter, test and lookup plugin of each collection in ``collections`` through ``loaders`` (Ansible's
    plugin loaders: ``type`` and ``get``); one message per name that is not a collection name, per collection that
    is not installed, and per plugin file or plugin that failed to load (the others are loaded all the same)."""
    problems = []
    for collection in collections:
        if not isinstance(collection, str) or not COLLECTION_NAME.match(collection):
            problems.append(f"{collection!r} is not a collection name (namespace.name)")
            continue
        try:
            import_module(f"ansible_collections.{collection}")
        except ImportError:
            problems.append(f"{collection}: no installed collection of that name")
            continue
        for loader in loaders:
            try:
                package = import_module(f"ansible_collections.{collection}.plugins.{loader.type}")
            except ImportError:
                continue  # the collection has no plugin of this kind
            names, unread = plugin_names(collection, loader.type, package)
            problems.extend(unread)
            load = partial(loader.get, class_only=True)
            for name in names:
                if problem := load_problem(name, load, loader.type, f" ({loader.type})"):
                    problems.append(problem)
    return problems


class CallbackModule(CallbackBase):
    """Loads the connection plugins of the option ``connections``, and the filter, test and lookup plugins of the
    option ``collections``, in the main process at the playbook's start."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.sglang.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook) -> None:
        names = self.get_option("connections") or []
        for problem in preload_problems(names, lambda name: connection_loader.get(name, class_only=True)):
            self._display.warning(f"gpufleet.sglang.preload: {problem}; it is loaded per task instead")
        collections = self.get_option("collections") or []
        for problem in preload_collection_problems(collections, (filter_loader, test_loader, lookup_loader)):
            self._display.warning(f"gpufleet.sglang.preload: {problem}; it is loaded per task instead")
