# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""confined_path: the one check for a path built from outside data."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import confined_path as cp


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "is empty"),
        ("/etc/passwd", "is absolute"),
        ("a//b", "empty segment"),
        ("a/", "empty segment"),
        ("../x", "'..' segment"),
        ("a/../../x", "'..' segment"),
        ("./x", "'.' segment"),
        ("a\\..\\b", "backslash"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("x" * 256, "longer than 255"),
        (None, "not a string"),
        (["a"], "not a string"),
    ],
)
def test_refuses_with_the_reason(name, why):
    with pytest.raises(cp.PathError, match="what-it-is") as err:
        cp.relative_name(name, "what-it-is")
    assert why in str(err.value)


@pytest.mark.parametrize("name", ["a", "a/b", "config.json", "sub/dir/model-00001-of-00002.safetensors", "x" * 255])
def test_accepts_plain_relative_names_unchanged(name):
    assert cp.relative_name(name, "n") == name


def test_segment_refuses_a_slash():
    assert cp.segment("abc", "s") == "abc"
    with pytest.raises(cp.PathError, match="single path component"):
        cp.segment("a/b", "s")


def test_confine_refuses_a_symlink_out_of_the_root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(cp.PathError, match="leads out of"):
        cp.confine(str(root), "link/file", "listing name")
    (root / "inner").mkdir()
    (root / "ok").symlink_to(root / "inner")
    assert cp.confine(str(root), "ok/file", "n") == str(root / "ok/file")


def test_confine_needs_an_absolute_root():
    with pytest.raises(cp.PathError, match="absolute"):
        cp.confine("relative", "a", "n")


def refused_or_inside(name: str, root: str) -> str | None:
    """The relative name ``name`` is taken as, checked to stay below ``root`` once joined; None where it is refused."""
    try:
        rel = cp.relative_name(name, "n")
    except cp.PathError:
        return None
    assert os.path.normpath(os.path.join(root, rel)).startswith(root + "/")
    return rel


@given(st.text(max_size=40))
def test_any_name_is_refused_or_stays_inside(name):
    rel = refused_or_inside(name, "/srv/models/root")
    assert rel in (None, name)


@given(st.lists(st.sampled_from(["a", "..", ".", "", "b", "/", "c.d"]), max_size=6).map("/".join))
def test_traversal_shapes_never_escape(name):
    refused_or_inside(name, "/r")


# -- open_regular --------------------------------------------------------------------------------


def _opened(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def test_open_regular_opens_a_regular_file_under_the_root(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.json").write_text("{}")
    assert _opened(cp.open_regular(str(tmp_path), "a/f.json", "record")) == str(tmp_path / "a" / "f.json")


@pytest.mark.parametrize(
    ("make", "name", "why"),
    [
        (lambda r: (r / "f").symlink_to("/etc/hostname"), "f", "is a symlink, not a regular file"),
        (lambda r: (r / "f").symlink_to(r / "g"), "f", "is a symlink"),
        (lambda r: (r / "d").symlink_to(r.parent), "d/x", "d is a symlink or not a directory"),
        (lambda r: (r / "d").write_text(""), "d/x", "d is a symlink or not a directory"),
        (lambda r: (r / "f").mkdir(), "f", "is a directory"),
        (lambda r: os.mkfifo(r / "f"), "f", "is a FIFO"),
        (lambda r: None, "../x", "'..' segment"),
    ],
)
def test_open_regular_refuses_links_and_special_files_without_blocking(tmp_path, make, name, why):
    root = tmp_path / "root"
    root.mkdir()
    (root / "g").write_text("")
    make(root)
    with pytest.raises(cp.PathError, match=why):
        cp.open_regular(str(root), name, "record")


def test_open_regular_leaves_missing_to_the_caller(tmp_path):
    with pytest.raises(FileNotFoundError):
        cp.open_regular(str(tmp_path), "a/b", "record")


@given(
    plan=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "a/b", "a/c", "b/a"]), st.sampled_from(["file", "dir", "up", "out", "fifo"])
        ),
        max_size=5,
    ),
    name=st.sampled_from(["a", "b", "a/b", "a/c", "b/a", "a/b/c", "../a", "a/../b"]),
)
def test_open_regular_opens_only_regular_files_inside_the_root(tmp_path, plan, name):
    base = tempfile.mkdtemp(dir=tmp_path)
    root = os.path.join(base, "root")
    os.mkdir(root)
    with open(os.path.join(base, "outside"), "w") as handle:
        handle.write("secret")
    for rel, kind in plan:
        path = os.path.join(root, rel)
        if os.path.lexists(path) or not os.path.isdir(os.path.dirname(path)):
            continue
        if kind == "file":
            with open(path, "w") as handle:
                handle.write("x")
        elif kind == "dir":
            os.mkdir(path)
        elif kind == "up":
            os.symlink(base, path)
        elif kind == "out":
            os.symlink(os.path.join(base, "outside"), path)
        else:
            os.mkfifo(path)
    try:
        fd = cp.open_regular(root, name, "record")
    except (cp.PathError, FileNotFoundError):
        return
    real = _opened(fd)
    assert real.startswith(root + "/")
    assert os.path.isfile(real)
    assert not os.path.islink(real)
