# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Default paths of an SGLang node (role sglang's ``sglang_root``, /opt/sglang), in one place for the
argument specs of the modules and action plugins that take them. Their documentation is the doc
fragment gpufleet.sglang.sglang_paths (plugins/doc_fragments/sglang_paths.py), which states the same
defaults; ansible-test sanity (validate-modules) and tests/unit/test_sglang_paths.py check that the two
agree."""

from __future__ import annotations

SGLANG_ROOT = "/opt/sglang"
# the link that selects the running release (role sglang's ``current``)
RELEASE_LINK = f"{SGLANG_ROOT}/current"
# the deployment records (module sglang_deployment's ``root``, role sglang_server's deployments_dir)
DEPLOYMENTS_DIR = f"{SGLANG_ROOT}/deployments"
# the sweep journal of playbooks/tune.yml on the node
TUNE_JOURNAL = f"{SGLANG_ROOT}/tune-journal.json"
