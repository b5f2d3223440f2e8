#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_warm_cache
short_description: Carry an SGLang node's JIT and autotune caches to the next nodes as a verified artifact
version_added: "0.1.0"
description:
  - Packs the cache directory of a node that became ready (SGLang's C(SGLANG_CACHE_DIR) with FlashInfer's,
    Triton's and torch inductor's caches under it) into a deterministic, content-addressed tar in a store
    shared by the nodes of a Proxmox host, and restores it on the next nodes before their restart.
  - The artifact is keyed on everything that makes the caches valid (O(key)); a restore uses only the
    artifact of the node's own key, checks the artifact's sha256 and every file's, and unpacks into a
    temporary directory beside the cache directory before swapping it in. A wrong key or digest restores
    nothing and says why.
  - O(state=collect) packs O(key.cache_dir) unless the store already holds a verified artifact for the key.
    O(state=restore) places the key's artifact at O(key.cache_dir) (the same absolute path it was built at),
    unless the directory already came from that artifact, or holds the node's own caches and O(replace) is
    false. O(state=inspect) reports the key, the stored artifact and the cache directory's origin.
  - A missing artifact, an empty cache directory or one over O(max_bytes) is not an error (action C(none)), nor
    an artifact or a key directory in the store that fails its checks (action C(refused), with a warning); the
    node starts cold.
  - The cache is read without following links; a file swapped for a link or rewritten while it is packed fails
    the collect naming it.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  state:
    description: What to do, see the description.
    type: str
    choices: [collect, restore, inspect]
    required: true
  key:
    description:
      - What makes the caches valid. Every field is required and checked; an unknown field is refused.
      - O(key.cache_dir) is the directory packed and restored (absolute; the same on every node).
    type: dict
    required: true
    suboptions:
      sglang_version:
        description: The SGLang release.
        type: str
        required: true
      flashinfer_version:
        description: The FlashInfer release installed with it.
        type: str
        required: true
      gpu_model:
        description: The GPU name nvidia-smi reports.
        type: str
        required: true
      compute_capability:
        description: The GPUs' compute capability, C(major.minor).
        type: str
        required: true
      driver_version:
        description: The NVIDIA driver version.
        type: str
        required: true
      cuda_version:
        description: The CUDA version of the release's stack.
        type: str
        required: true
      model_revision:
        description: The model's resolved commit.
        type: str
        required: true
      profile:
        description: The server profile's name (its flags decide which kernels are built and tuned).
        type: str
        required: true
      cache_dir:
        description: The absolute cache directory (C(SGLANG_CACHE_DIR)).
        type: str
        required: true
      release_dir:
        description: The absolute release directory the server imports from.
        type: str
        required: true
  store:
    description:
      - The store directory (on a Proxmox host, a host directory bind-mounted into its containers).
      - It must not overlap O(key.cache_dir) (neither inside the other); the module fails naming both.
      - The key's directory in it must be a directory inside the store (a symlink out of it is refused);
        only regular files named C(<sha256>.tar) there are artifacts.
    type: path
    required: true
  owner:
    description: User that owns the restored files (O(state=restore)); default the module's user.
    type: str
  group:
    description: Group of the restored files (O(state=restore)); default the module's group.
    type: str
  replace:
    description: Restore over a cache directory that holds the node's own caches (not from an artifact).
    type: bool
    default: false
  max_bytes:
    description: The largest cache (sum of file sizes) packed or restored.
    type: int
    default: 17179869184
attributes:
  check_mode:
    support: full
    description: Reports the action it would take and why; writes nothing.
  diff_mode:
    support: none
    description: The caches are binary; the return values name the artifact and its digest instead.
notes:
  - Stdlib only; runs on the node. docs/warm-start.md says which caches of which release port between nodes.
"""

EXAMPLES = r"""
- name: Collect the canary's caches once it is ready
  gpufleet.sglang.sglang_warm_cache:
    state: collect
    store: /var/cache/gpufleet/warm
    key: "{{ sglang_server_warm_cache_key }}"

- name: Place them on the next node before its restart
  gpufleet.sglang.sglang_warm_cache:
    state: restore
    store: /var/cache/gpufleet/warm
    key: "{{ sglang_server_warm_cache_key }}"
    owner: sglang
    group: sglang
"""

RETURN = r"""
action:
  description: >-
    What was done (or would be, in check mode): C(collected), C(present) (the store already holds it),
    C(restored), C(current) (the cache directory came from this artifact), C(kept) (the node's own caches
    left alone), C(refused) (an artifact, or the key's directory in the store, failed its checks: not used),
    C(none) (nothing to do), C(inspected).
  returned: always
  type: str
  sample: restored
reason:
  description: Why, in words.
  returned: always
  type: str
  sample: the store holds an artifact for this key; restored at /var/cache/sglang
key:
  description: The checked key fields.
  returned: always
  type: dict
  sample: {"sglang_version": "0.5.23", "profile": "glm5_nvfp4_tp8"}
key_digest:
  description: sha256 of the key's canonical JSON; the artifact's directory in the store.
  returned: always
  type: str
  sample: c258b13c6d9b9107d4a41f89145208c00b77acb89f6c845c3972b263c3a99a94
digest:
  description: sha256 of the artifact (its file name in the store); empty when there is none.
  returned: always
  type: str
  sample: ed9d6dd09a0ed59ec7e5eb888a668b5565896209d1d7c896ccb15b8e95dd73b7
artifact:
  description: Path of the artifact in the store; empty when there is none.
  returned: always
  type: str
  sample: /var/cache/gpufleet/warm/c258.../ed9d....tar
files:
  description: Files in the artifact (or, in check mode before a collect, in the cache directory).
  returned: always
  type: int
  sample: 1118
bytes:
  description: Their total size in bytes.
  returned: always
  type: int
  sample: 66825139
left_out:
  description:
    - Entries of the cache directory left out of a collect (not regular files), with why.
    - Not called C(skipped), which Ansible reads as "the task was skipped" when it is not empty.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "flashinfer/cubins", "why": "a symlink"}]
"""

import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.warm_cache import (
    DEFAULT_MAX_BYTES,
    KEY_FIELDS,
    Bounds,
    TooLargeError,
    WarmCacheError,
    cache_key,
    check_apart,
    find_artifacts,
    pack,
    read_marker,
    restore,
    scan,
    verify,
)

_KEY_OPTION = {"type": "str", "required": True}


def _has_files(directory: str) -> bool:
    for entry in os.walk(directory):
        names = entry[2]
        if names:
            return True
    return False


# artifacts of one key tried, newest first: one damaged (or planted with an mtime in the future)
# must not shadow a good one, and a store full of planted ones must not make every run verify them all
MAX_CANDIDATES = 4


def _stored(module: AnsibleModule, key_digest: str, bounds: Bounds) -> tuple[dict | None, str]:
    """The newest verified artifact of the key in the store, or None and why not. Each newer
    artifact that fails its checks is a warning."""
    store = module.params["store"]
    try:
        paths = find_artifacts(store, key_digest)
    except WarmCacheError as exc:
        return None, f"the store's entry for this key failed its checks ({exc}): not used"
    if not paths:
        return None, f"the store {store} holds no artifact for this key"
    refused = []
    for path in paths[:MAX_CANDIDATES]:
        try:
            checked = verify(path, bounds=bounds)
        except WarmCacheError as exc:
            refused.append(f"the stored artifact {path} failed its checks ({exc}): not used")
            continue
        if checked["key"]["digest"] != key_digest:
            refused.append(f"the stored artifact {path} was built for another key: not used")
            continue
        for why in refused:
            module.warn(f"{why}; an older one of this key is used")
        return dict(checked, path=path), ""
    return None, "; ".join(refused)


def _collect(module: AnsibleModule, key: dict, result: dict) -> None:
    params = module.params
    root, bounds = key["fields"]["cache_dir"], Bounds(max_bytes=params["max_bytes"])
    found, why_not = _stored(module, key["digest"], bounds)
    if found:
        result.update(action="present", reason="the store already holds a verified artifact for this key")
        result.update(artifact=found["path"], digest=found["digest"], files=found["files"], bytes=found["bytes"])
        return
    if not os.path.isdir(root) or not _has_files(root):
        result.update(action="none", reason=f"the cache directory {root} is missing or empty: nothing to collect")
        return
    reason = f"packed {root} ({why_not})"
    if module.check_mode:
        try:
            seen = scan(root, bounds=bounds)
        except TooLargeError as exc:
            result.update(action="none", reason=f"not collected: {exc}")
            return
        result.update(changed=True, action="collected", reason=reason, files=len(seen["files"]), bytes=seen["bytes"])
        result["left_out"] = seen["skipped"]
        return
    try:
        packed = pack(root, params["store"], key["fields"], bounds=bounds)
    except TooLargeError as exc:
        module.warn(str(exc))
        result.update(action="none", reason=f"not collected: {exc}")
        return
    result.update(changed=True, action="collected", reason=reason, artifact=packed["path"], digest=packed["digest"])
    result.update(files=packed["files"], bytes=packed["bytes"], left_out=packed["skipped"])


def _ids(module: AnsibleModule) -> tuple[int | None, int | None]:
    owner, group = module.params["owner"], module.params["group"]
    try:
        uid = pwd.getpwnam(owner).pw_uid if owner else None
        gid = grp.getgrnam(group).gr_gid if group else None
    except KeyError as exc:
        module.fail_json(msg=f"owner or group {exc} does not exist on this node: create it first (role sglang_server)")
    return uid, gid


def _restore(module: AnsibleModule, key: dict, result: dict) -> None:
    params = module.params
    target, bounds = key["fields"]["cache_dir"], Bounds(max_bytes=params["max_bytes"])
    found, why_not = _stored(module, key["digest"], bounds)
    if not found:
        action = "refused" if "not used" in why_not else "none"
        if action == "refused":
            module.warn(why_not)
        result.update(action=action, reason=f"{why_not}: the node starts cold")
        return
    result.update(artifact=found["path"], digest=found["digest"], files=found["files"], bytes=found["bytes"])
    marker = read_marker(target) or {}
    if marker.get("digest") == found["digest"]:
        result.update(action="current", reason=f"{target} already came from this artifact")
        return
    if os.path.isdir(target) and _has_files(target) and not marker and not params["replace"]:
        result.update(action="kept", reason=f"{target} holds this node's own caches; replace=true restores over them")
        return
    uid, gid = _ids(module)  # before check mode's answer: a missing owner fails both runs alike
    result.update(
        changed=True, action="restored", reason=f"the store holds an artifact for this key; restored at {target}"
    )
    if module.check_mode:
        return
    restore(found["path"], target, key["fields"], bounds=bounds, uid=uid, gid=gid)


def _inspect(module: AnsibleModule, key: dict, result: dict) -> None:
    params = module.params
    found, why_not = _stored(module, key["digest"], Bounds(max_bytes=params["max_bytes"]))
    marker = read_marker(key["fields"]["cache_dir"]) or {}
    origin = f"; {key['fields']['cache_dir']} came from artifact {marker.get('digest')}" if marker else ""
    if found:
        result.update(artifact=found["path"], digest=found["digest"], files=found["files"], bytes=found["bytes"])
    result.update(action="inspected", reason=(why_not or "the store holds a verified artifact for this key") + origin)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "required": True, "choices": ["collect", "restore", "inspect"]},
            "key": {
                "type": "dict",
                "required": True,
                "no_log": False,  # the cache's versions and paths, no secret
                "options": {name: dict(_KEY_OPTION) for name in KEY_FIELDS},
            },
            "store": {"type": "path", "required": True},
            "owner": {"type": "str"},
            "group": {"type": "str"},
            "replace": {"type": "bool", "default": False},
            "max_bytes": {"type": "int", "default": DEFAULT_MAX_BYTES},
        },
        supports_check_mode=True,
    )
    result = {"changed": False, "digest": "", "artifact": "", "files": 0, "bytes": 0, "left_out": []}
    try:
        key = cache_key(module.params["key"])
        result.update(key=key["fields"], key_digest=key["digest"])
        check_apart(module.params["store"], key["fields"]["cache_dir"])
        {"collect": _collect, "restore": _restore, "inspect": _inspect}[module.params["state"]](module, key, result)
    except (WarmCacheError, OSError) as exc:
        module.fail_json(msg=f"sglang_warm_cache {module.params['state']}: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
