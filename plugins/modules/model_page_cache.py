#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_page_cache
short_description: Read a snapshot of the model store into the host's page cache before a server loads it
version_added: "0.1.0"
description:
  - Reads the files of one snapshot of the model store (C(<store>/<org>/<repo>/<commit>/), as listed in
    its C(.gpufleet-model.json) record) into the host's page cache, so that a server about to restart on
    it (in a container bind-mounting the store, which shares the host's kernel and page cache) loads
    its checkpoint from memory.
  - Reads at most C(MemAvailable) of C(/proc/meminfo) less O(reserve_bytes) (or O(budget_bytes)), in the
    order the server reads the files (small files first, then the weight files by name); what does not
    fit is reported as RV(skipped_bytes).
  - Every name of the record is a plain relative path, the snapshot directory lies in the store (a link
    out of it is refused), and nothing below it is followed (a symlink or a special file in the snapshot
    fails the module, never opened for reading). A file that vanishes, shrinks or cannot be read while
    it is read is reported in RV(problems), never a failure.
  - A store, snapshot or record that is not there is a no-op with RV(not_warmed) saying why.
  - Changes no file, so C(changed) is always false (the page cache is the kernel's to manage; a warm
    cache is not a state the module keeps). In check mode it returns the plan and reads nothing.
  - Progress of a long read. With O(batch) the module reads one batch of O(batch_bytes) of the plan; the
    role C(model_store) (entry point C(page_cache)) loops over the batches with one line each.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  store:
    description: The store directory (the role model_store's C(model_store_dir)).
    type: path
    required: true
  snapshot:
    description: The snapshot, C(<org>/<repo>/<commit>) relative to O(store) (the commit directory a server loads).
    type: str
    required: true
  reserve_bytes:
    description:
      - Bytes of C(MemAvailable) the warm-up leaves alone (role model_store, C(model_store_page_cache_reserve_bytes)).
    type: int
    required: true
  budget_bytes:
    description:
      - Read at most this many bytes instead of C(MemAvailable) less O(reserve_bytes) (the batches of one
        warm-up pass the budget of its plan, so that every batch cuts the same plan).
    type: int
  batch_bytes:
    description: Bytes per batch of the plan (role model_store, C(model_store_page_cache_batch_bytes)).
    type: int
    required: true
  batch:
    description: Read only this batch of the plan (0-based); all of them when not given.
    type: int
  threads:
    description: Files read at once (1 to 64; role model_store, C(model_store_page_cache_threads)).
    type: int
    default: 1
  meminfo:
    description: The meminfo file (tests point it at a fixture).
    type: path
    default: /proc/meminfo
attributes:
  check_mode:
    description: Plans and reads nothing.
    support: full
  diff_mode:
    description: No file changes, so there is nothing to show.
    support: none
"""

EXAMPLES = r"""
- name: Warm the snapshot a node is about to load
  gpufleet.sglang.model_page_cache:
    store: /srv/gpufleet/models
    snapshot: zai-org/GLM-5-NVFP4/0123456789abcdef0123456789abcdef01234567
    reserve_bytes: 8589934592
    batch_bytes: 17179869184
  register: warm
"""

RETURN = r"""
not_warmed:
  description:
    - Why nothing was read (no store, no snapshot, no record); empty when it was read.
    - Not called C(skipped), which Ansible reserves for a task it skipped (ansible-core 2.21 drops it from a
      registered module result).
  type: str
  returned: always
files:
  description: Files of the snapshot with at least one byte planned (with O(batch), those of that batch).
  type: int
  returned: always
total_bytes:
  description: Bytes of the whole snapshot.
  type: int
  returned: always
planned_bytes:
  description: Bytes the plan reads (the snapshot up to the budget).
  type: int
  returned: always
skipped_bytes:
  description: Bytes of the snapshot left out for the memory budget.
  type: int
  returned: always
budget_bytes:
  description: The budget the plan was cut at.
  type: int
  returned: always
mem_available_bytes:
  description: C(MemAvailable) when the budget came from it, else null.
  type: int
  returned: always
batches:
  description: Per batch of the plan, its files, bytes and the planned bytes up to its end.
  type: list
  elements: dict
  returned: always
bytes_read:
  description: Bytes read (0 in check mode).
  type: int
  returned: always
seconds:
  description: Seconds the reads took.
  type: float
  returned: always
mb_per_s:
  description: Bytes read per second, in MiB/s.
  type: float
  returned: always
problems:
  description: File -> what happened (vanished, shrank, unreadable) for files not read in full.
  type: dict
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import confined_path as cp
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import page_cache as pc


def nothing(why: str) -> dict:
    return {
        "changed": False,
        "not_warmed": why,
        "files": 0,
        "total_bytes": 0,
        "planned_bytes": 0,
        "skipped_bytes": 0,
        "budget_bytes": 0,
        "mem_available_bytes": None,
        "batches": [],
        "bytes_read": 0,
        "seconds": 0.0,
        "mb_per_s": 0.0,
        "problems": {},
    }


def read_meminfo(path: str) -> str:
    with open(path, "rb") as handle:
        data = handle.read(pc.MAX_MEMINFO_BYTES)
    return data.decode("ascii", "replace")


def warm(p: dict, check_mode: bool) -> dict:
    store = p["store"]
    pc.check_threads(p["threads"])
    if not os.path.isdir(store):
        return nothing(f"no model store at {store}")
    base = pc.snapshot_path(store, p["snapshot"])
    if not os.path.isdir(base):
        return nothing(f"no snapshot {p['snapshot']} in {store}")
    entries = pc.manifest(base, p["snapshot"])
    if entries is None:
        return nothing(f"snapshot {p['snapshot']} has no record ({pc.ms.MARKER}): not verified by the model store")
    available = None
    if p["budget_bytes"] is None:
        available = pc.mem_available(read_meminfo(p["meminfo"]))
        limit = pc.budget(available, p["reserve_bytes"])
    else:
        limit = pc.budget(p["budget_bytes"], 0)
    cut = pc.plan(entries, limit)
    all_batches = pc.batches(cut.pieces, p["batch_bytes"])
    result = {
        **nothing(""),
        "files": cut.files,
        "total_bytes": cut.total_bytes,
        "planned_bytes": cut.planned_bytes,
        "skipped_bytes": cut.skipped_bytes,
        "budget_bytes": limit,
        "mem_available_bytes": available,
        "batches": pc.batch_summary(all_batches),
    }
    if p["batch"] is None:
        pieces = list(cut.pieces)
    elif 0 <= p["batch"] < len(all_batches):
        pieces = all_batches[p["batch"]]
        result["files"] = len({piece.path for piece in pieces})
    else:
        raise pc.PageCacheError(f"batch {p['batch']} is not one of the plan's {len(all_batches)} batch(es)")
    if not check_mode:
        result.update(pc.read_pieces(base, pieces, threads=p["threads"]))
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "store": {"type": "path", "required": True},
            "snapshot": {"type": "str", "required": True},
            "reserve_bytes": {"type": "int", "required": True},
            "budget_bytes": {"type": "int"},
            "batch_bytes": {"type": "int", "required": True},
            "batch": {"type": "int"},
            "threads": {"type": "int", "default": 1},
            "meminfo": {"type": "path", "default": "/proc/meminfo"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not os.path.isabs(p["store"]):
        module.fail_json(msg=f"store {p['store']!r} must be an absolute path")
    try:
        module.exit_json(**warm(p, module.check_mode))
    except (pc.PageCacheError, cp.PathError) as exc:
        module.fail_json(msg=f"model_page_cache: {exc}; nothing was read past it", error=type(exc).__name__)
    except OSError as exc:
        module.fail_json(msg=f"model_page_cache: {exc.filename or p['meminfo']}: {exc.strerror}", error="OSError")


if __name__ == "__main__":
    main()
