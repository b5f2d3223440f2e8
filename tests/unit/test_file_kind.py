# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The words for a file's kind (module_utils/common/confined_path.py file_kind and kind_of), which
confined_path, model_store and warm_cache use as they are and sglang/deployment.py words its own way
("symbolic link", "special file"): every kind stat tells apart, on st_mode values."""

from __future__ import annotations

import stat

import pytest

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.confined_path import (
    FILE_KINDS,
    file_kind,
    kind_of,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.deployment import _kind

CASES = [
    (stat.S_IFREG | 0o644, "regular file", "a regular file", "special file"),
    (stat.S_IFDIR | 0o755, "directory", "a directory", "directory"),
    (stat.S_IFLNK | 0o777, "symlink", "a symlink", "symbolic link"),
    (stat.S_IFIFO | 0o600, "FIFO", "a FIFO", "FIFO"),
    (stat.S_IFSOCK | 0o600, "socket", "a socket", "socket"),
    (stat.S_IFCHR | 0o666, "character device", "a character device", "character device"),
    (stat.S_IFBLK | 0o660, "block device", "a block device", "block device"),
    (0o644, None, "not a regular file", "special file"),
]


@pytest.mark.parametrize(("mode", "noun", "words", "deployment_words"), CASES)
def test_each_kind_is_named(mode, noun, words, deployment_words):
    assert file_kind(mode) == noun
    assert kind_of(mode) == words
    assert _kind(mode) == deployment_words


def test_every_named_kind_is_a_case():
    assert {noun for _test, noun in FILE_KINDS} == {case[1] for case in CASES} - {None}
