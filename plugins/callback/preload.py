# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Callback plugin: loads connection plugins once in the controller's main process, before any task runs."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load the container connections once in the controller, not once per task
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
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# callbacks_enabled = gpufleet.sglang.preload
#
# [callback_gpufleet_preload]
# connections = gpufleet.sglang.pct_ssh, gpufleet.sglang.pct_pipelined
"""

import re

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import connection_loader

# a plugin name as a collection spells it: a short name, or namespace.collection.name
PLUGIN_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}\Z")


def preload_problems(names: list, load) -> list[str]:
    """Load each connection plugin named in ``names`` with ``load`` (the loader's ``get``, class only); one message per
    name that is not a plugin name, that no plugin answers to or whose loading raised. Pure but for ``load``."""
    problems = []
    for name in names:
        if not isinstance(name, str) or not PLUGIN_NAME.match(name):
            problems.append(f"{name!r} is not a connection plugin name (namespace.collection.name)")
            continue
        try:
            found = load(name)
        except Exception as exc:  # any failure here only costs speed: say it and go on
            problems.append(f"{name} could not be loaded: {type(exc).__name__}: {exc}")
            continue
        if found is None:
            problems.append(f"{name}: no connection plugin of that name")
    return problems


class CallbackModule(CallbackBase):
    """Loads the connection plugins of the option ``connections`` in the main process at the playbook's start."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.sglang.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook) -> None:
        names = self.get_option("connections") or []
        for problem in preload_problems(names, lambda name: connection_loader.get(name, class_only=True)):
            self._display.warning(f"gpufleet.sglang.preload: {problem}; it is loaded per task instead")
