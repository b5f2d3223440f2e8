#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_state
short_description: Read in one call whether a role's files, directories and accounts are as wanted
version_added: "0.1.0"
description:
  - Compares what a role is about to write with the node as it is, without changing anything, so
    that a role can skip its writing tasks on a node where nothing would change. One module call
    instead of one per file, directory and account (each about 0.2 CPU s on the node;
    docs/connection.md, "Lever C").
  - A file matches when it is a regular file (not a symlink) with the owner, group, mode and sha256
    wanted; a directory when it is a directory (not a symlink) with the owner, group and mode; an
    absent path when nothing is there. A user matches when it exists with the primary group, home
    (an existing directory) and shell wanted and is a member of each wanted supplementary group the
    node has (as M(ansible.builtin.user) with C(append=true) leaves it). A group matches when it exists.
  - Anything else is drift, reported with a reason that names the path or the account. A role runs
    its normal tasks when there is any drift, so a changed file is found and fixed as before.
  - Also reads the paths of O(paths) as M(ansible.builtin.stat) with C(follow=false) would, so a
    role reads several paths in the same call, and lists the directories of O(list_dirs) as
    M(ansible.builtin.find) would.
  - Also reads, with one C(dpkg-query), whether the Debian packages of O(packages) are installed and
    those of O(held) on hold, so that a role runs its apt tasks (each a load of apt's cache) only for
    what is missing (docs/connection.md, "Lever C for apt"). The rule is conservative. A package counts
    only when every line dpkg prints for it says C(ok installed), at exactly the version asked for;
    anything else is left to apt, which decides as before.
  - Also reads, with one C(systemctl show), whether the systemd units of O(units) are loaded, enabled and
    active, as M(ansible.builtin.systemd_service) with C(enabled=true) and C(state=started) leaves them, so that a
    role runs those tasks only for a unit that is not (RV(drift) names it). Anything else is drift.
  - Also reads the files dpkg lists for each package of O(package_files) (C(dpkg-query --listfiles)), and
    how each path of O(diversions) is diverted (C(dpkg-divert --listpackage) and C(--truename), as
    M(community.general.dpkg_divert) reads it), so that a role that configures an apt repository reads
    it in the same call (docs/connection.md, "Lever C for apt").
  - Each want is schema-checked; a bad one fails the task naming the entry and the field. A line of
    dpkg's output that is not its format fails the task naming the line.
author:
  - gpufleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - gpufleet.sglang.read_only
options:
  files:
    description: Files, directories and absent paths the role wants.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path, without control characters or C(.)/C(..) segments.
        type: str
        required: true
      state:
        description: What the path should be.
        type: str
        choices: [file, directory, absent]
        default: file
      sha256:
        description:
          - sha256 (64 lowercase hex digits) of the file's wanted bytes; required for C(state=file).
          - Never logged (the file may hold a secret).
        type: str
      owner:
        description:
          - Owner's user name, or a numeric uid (digits, as M(ansible.builtin.file) takes one); not checked when
            left out (as a writing task that does not set it).
        type: str
      group:
        description: Group name, or a numeric gid; not checked when left out.
        type: str
      mode:
        description: Octal permission bits as a string, for example C('0644'); required unless C(state=absent).
        type: str
  users:
    description: Users the role wants.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: User name.
        type: str
        required: true
      group:
        description: Primary group's name; not checked when left out (a user created without naming one).
        type: str
      groups_where_present:
        description: Supplementary groups the user must be in, each only where the node has that group.
        type: list
        elements: str
        default: []
      home:
        description: Home directory (must exist, unless O(users[].home_exists=false)).
        type: str
        required: true
      home_exists:
        description:
          - Whether the home directory must exist. V(false) for a system user whose home is a path that is never
            created (C(/nonexistent), as M(ansible.builtin.user) with C(create_home=false) leaves it).
        type: bool
        default: true
      shell:
        description: Login shell.
        type: str
        required: true
  groups:
    description: Groups that must exist.
    type: list
    elements: str
    default: []
  paths:
    description: Paths to read as M(ansible.builtin.stat) with C(follow=false) would (RV(stat)).
    type: list
    elements: str
    default: []
  packages:
    description:
      - Debian packages that must be installed, V(name) or V(name=version) (apt's form, the exact
        version). Satisfied only when every line dpkg prints for the package says C(ok installed) with
        the selection C(install) or C(hold), at that version when one is given (RV(packages_missing)).
      - apt's other forms, V(name:arch) and comparisons such as V(name>=version), are accepted and always
        returned in RV(packages_missing), for apt to resolve.
    type: list
    elements: str
    default: []
  held:
    description: Debian packages that must be installed with the dpkg selection C(hold) (RV(not_held)).
    type: list
    elements: str
    default: []
  units:
    description: Systemd units that must be loaded, enabled and active; one that is not is named in RV(drift).
    type: list
    elements: str
    default: []
  list_dirs:
    description:
      - Directories whose entries to list (RV(listed)), as M(ansible.builtin.find) with C(recurse=false),
        C(hidden=false) and C(follow=false) lists them, so that a role that prunes a directory reads it in the
        same call. A directory that does not exist lists nothing; one of more than 4,096 entries fails the task
        naming it.
    type: list
    elements: str
    default: []
  package_files:
    description:
      - Debian packages whose files to list (RV(package_files)); a package dpkg does not have lists none.
    type: list
    elements: str
    default: []
  diversions:
    description: Absolute paths whose dpkg diversion to read (RV(diversions)).
    type: list
    elements: str
    default: []
notes:
  - Stdlib only; runs on the target host.
"""

EXAMPLES = r"""
- name: Read whether the server's files are as this run would write them
  gpufleet.sglang.node_state:
    files:
      - path: /etc/sglang/sglang-server.env
        sha256: "{{ env_text | hash('sha256') }}"
        owner: root
        group: root
        mode: "0644"
      - path: /var/cache/sglang
        state: directory
        owner: sglang
        group: sglang
        mode: "0750"
    users:
      - name: sglang
        group: sglang
        groups_where_present: [video, render]
        home: /var/lib/sglang
        shell: /usr/sbin/nologin
    groups: [sglang]
    paths: [/opt/sglang/current]
  register: server_state

- name: Write the files only where something differs
  ansible.builtin.include_tasks: files.yml
  when: server_state.drift | length > 0
"""

RETURN = r"""
drift:
  description:
    - Why the node is not as wanted, one reason per difference, each naming the path or account.
    - Empty when the node is as wanted.
  returned: always
  type: list
  elements: str
  sample: ["/etc/sglang/sglang-server.env: content differs", "user sglang: not in group(s) render",
           "unit nvidia-persistenced.service: ActiveState inactive, wanted active"]
stat:
  description:
    - Each path of O(paths) with the keys of M(ansible.builtin.stat) (C(follow=false)) that roles read.
    - C(exists); where it exists C(isreg), C(isdir), C(islnk), C(mtime) (seconds since the epoch); for a
      symlink C(lnk_target) (as written) and C(lnk_source) (fully resolved).
  returned: always
  type: dict
  sample:
    /opt/sglang/current:
      exists: true
      isreg: false
      isdir: false
      islnk: true
      lnk_target: releases/sglang-0.5.23-0123456789
      lnk_source: /opt/sglang/releases/sglang-0.5.23-0123456789
packages_missing:
  description: The entries of O(packages) that dpkg does not show installed as asked, in their order.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-driver-cuda=580.159.04-1"]
not_held:
  description: The entries of O(held) that dpkg does not show installed and on hold, in their order.
  returned: always
  type: list
  elements: str
  sample: ["libnvidia-compute"]
package_files:
  description: Each package of O(package_files) with the lines C(dpkg-query --listfiles) prints for it.
  returned: always
  type: dict
  sample:
    cuda-keyring: ["/usr/share/keyrings/cuda-archive-keyring.gpg", "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"]
listed:
  description:
    - Each directory of O(list_dirs) with its entries whose names do not start with a dot, sorted by name, each with
      C(name), C(path) and the keys of RV(stat).
  returned: always
  type: dict
  sample:
    /opt/sglang/releases:
      - name: sglang-0.5.23-0123456789
        path: /opt/sglang/releases/sglang-0.5.23-0123456789
        exists: true
        isreg: false
        isdir: true
        islnk: false
        mtime: 1796563200.5
diversions:
  description:
    - Each path of O(diversions) with its diversion's C(holder) and C(divert), both null where it is not diverted.
  returned: always
  type: dict
  sample:
    /etc/apt/sources.list.d/cuda-debian12-x86_64.list:
      holder: LOCAL
      divert: /etc/apt/sources.list.d/cuda-debian12-x86_64.list.disabled
now:
  description: The node's clock when it was read, seconds since the epoch (to compare with RV(stat)'s C(mtime)).
  returned: always
  type: float
  sample: 1796563200.5
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.arg_spec import dict_list
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.dpkg_status import (
    DPKG_QUERY_FORMAT,
    DpkgStatusError,
    check_name,
    parse_diversion,
    split_spec,
    unsatisfied,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.node_state import (
    StateError,
    check_wants,
    list_directory,
    read_state,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.unit_state import (
    SHOW_PROPERTIES,
    UnitStateError,
    check_units,
    parse_show,
    unit_drift,
)


def read_packages(module: AnsibleModule, packages: list, held: list) -> dict:
    """``packages_missing`` and ``not_held`` from one dpkg-query of every name (none without a name)."""
    if not packages and not held:
        return {"packages_missing": [], "not_held": []}
    try:
        names = list(dict.fromkeys(split_spec(spec)[0] for spec in [*packages, *held]))
    except DpkgStatusError as exc:
        module.fail_json(msg=f"node_state: bad input: {exc}")
    # rc 1: dpkg knows none of some name (not installed); it still lists the others
    rc, out, err = module.run_command(["dpkg-query", "--show", "--showformat", DPKG_QUERY_FORMAT, *names])
    if rc not in (0, 1):
        module.fail_json(msg=f"node_state: dpkg-query exited {rc}: {err.strip()[:300]}")
    try:
        return {"packages_missing": unsatisfied(out, packages), "not_held": unsatisfied(out, held, "hold")}
    except DpkgStatusError as exc:
        module.fail_json(msg=f"node_state: {exc}")


def read_units(module: AnsibleModule, units: list) -> list:
    """Reasons for the units of ``units`` that are not loaded, enabled and active (one systemctl show)."""
    if not units:
        return []
    try:
        names = check_units(units)
    except UnitStateError as exc:
        module.fail_json(msg=f"node_state: bad input: {exc}")
    systemctl = module.get_bin_path("systemctl")
    if systemctl is None:
        return [f"unit {name}: no systemctl on the node" for name in names]
    rc, out, err = module.run_command([systemctl, "show", f"--property={','.join(SHOW_PROPERTIES)}", "--", *names])
    if rc != 0:
        return [f"unit {name}: systemctl show exited {rc}: {err.strip()[:200]}" for name in names]
    try:
        return unit_drift(parse_show(out, names), names)
    except UnitStateError as exc:
        module.fail_json(msg=f"node_state: {exc}")


def read_package_files(module: AnsibleModule, names: list) -> dict:
    """``{package: [line, ...]}``: what ``dpkg-query --listfiles`` prints for each (none where dpkg lacks it)."""
    try:
        checked = [check_name(name) for name in names]
    except DpkgStatusError as exc:
        module.fail_json(msg=f"node_state: bad input: package_files: {exc}")
    listed = {}
    for name in checked:
        rc, out, _err = module.run_command(["dpkg-query", "--listfiles", name])
        listed[name] = out.splitlines() if rc == 0 else []
    return listed


def _checked_paths(module: AnsibleModule, paths: list, option: str) -> list:
    """The absolute paths of a path-list option, checked as ``paths`` is (a bad one fails naming the option)."""
    try:
        return check_wants([], [], [], paths)[3]
    except StateError as exc:
        module.fail_json(msg=f"node_state: bad input: {option}: {exc}")


def read_listings(module: AnsibleModule, paths: list) -> dict:
    """``{path: [entry, ...]}``: each directory's entries (hidden names left out), as find would list them."""
    listed = {}
    for path in _checked_paths(module, paths, "list_dirs"):
        try:
            listed[path] = list_directory(path)
        except OSError as exc:
            module.fail_json(msg=f"node_state: cannot list {exc.filename or path}: {exc.strerror or exc}")
    return listed


def read_diversions(module: AnsibleModule, paths: list) -> dict:
    """``{path: {"holder": ..., "divert": ...}}`` from dpkg-divert, as community.general.dpkg_divert reads it."""
    checked = _checked_paths(module, paths, "diversions")
    if not checked:
        return {}
    dpkg_divert = module.get_bin_path("dpkg-divert", required=True)
    found = {}
    for path in checked:
        answers = []
        for flag in ("--listpackage", "--truename"):
            rc, out, err = module.run_command([dpkg_divert, flag, path])
            if rc != 0:
                module.fail_json(msg=f"node_state: dpkg-divert {flag} {path} exited {rc}: {err.strip()[:300]}")
            answers.append(out)
        try:
            found[path] = parse_diversion(path, *answers)
        except DpkgStatusError as exc:
            module.fail_json(msg=f"node_state: {exc}")
    return found


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": dict_list(
                path={"type": "str", "required": True},
                state={"type": "str", "choices": ["file", "directory", "absent"], "default": "file"},
                sha256={"type": "str", "no_log": True},
                owner={"type": "str"},
                group={"type": "str"},
                mode={"type": "str"},
            ),
            "users": dict_list(
                name={"type": "str", "required": True},
                group={"type": "str"},
                groups_where_present={"type": "list", "elements": "str", "default": []},
                home={"type": "str", "required": True},
                home_exists={"type": "bool", "default": True},
                shell={"type": "str", "required": True},
            ),
            "groups": {"type": "list", "elements": "str", "default": []},
            "paths": {"type": "list", "elements": "str", "default": []},
            "packages": {"type": "list", "elements": "str", "default": []},
            "held": {"type": "list", "elements": "str", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "package_files": {"type": "list", "elements": "str", "default": []},
            "diversions": {"type": "list", "elements": "str", "default": []},
            "list_dirs": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        files, users, groups, paths = check_wants(params["files"], params["users"], params["groups"], params["paths"])
    except StateError as exc:
        module.fail_json(msg=f"node_state: bad input: {exc}")
    try:
        result = read_state(files, users, groups, paths)
    except OSError as exc:
        module.fail_json(msg=f"node_state: cannot read {exc.filename or 'the node'}: {exc.strerror or exc}")
    result["drift"] = [*result["drift"], *read_units(module, params["units"])]
    module.exit_json(
        changed=False,
        **result,
        **read_packages(module, params["packages"], params["held"]),
        package_files=read_package_files(module, params["package_files"]),
        diversions=read_diversions(module, params["diversions"]),
        listed=read_listings(module, params["list_dirs"]),
        now=time.time(),
    )


if __name__ == "__main__":
    main()
