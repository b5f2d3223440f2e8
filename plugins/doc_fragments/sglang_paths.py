# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node paths several modules take (below role sglang's ``sglang_root``, /opt/sglang).

The defaults are those of plugins/module_utils/sglang/paths.py, which the argument specs use;
ansible-test sanity (validate-modules) and tests/unit/test_sglang_paths.py check that they agree.
"""

from __future__ import annotations


class ModuleDocFragment:
    # gpufleet.sglang.sglang_paths: the release link
    DOCUMENTATION = r"""
options:
  release_link:
    description:
      - The link that selects the running release (role sglang's C(current) link, C(sglang_server_release_link)).
      - Restoring or rolling back a deployment points it back at that deployment's release.
    type: path
    default: /opt/sglang/current
"""

    # gpufleet.sglang.sglang_paths.root: the deployment records, for module sglang_deployment
    ROOT = r"""
options:
  root:
    description:
      - Directory holding the deployments and the C(current)/C(previous) links (created 0700),
        C(sglang_server_deployments_dir).
    type: path
    default: /opt/sglang/deployments
"""

    # gpufleet.sglang.sglang_paths.tune: the sweep journal and the deployment records, for the tune modules
    TUNE = r"""
options:
  journal:
    description: The sweep journal on the node (C(sglang_tune_journal)).
    type: path
    default: /opt/sglang/tune-journal.json
  deployments_dir:
    description: The node's deployment records, as module gpufleet.sglang.sglang_deployment keeps them
      (C(sglang_server_deployments_dir)).
    type: path
    default: /opt/sglang/deployments
"""
