"""The collection's metadata tells the truth about the code.

- galaxy.yml `dependencies`, requirements.yml and the execution environment's collections are
  exactly the collections the product (roles, plugins, playbooks, the reference inventory) uses;
  collections only tests use are available to the test toolchain.
- Versions agree: galaxy.yml with changelogs/changelog.yaml and CHANGELOG.md, meta/runtime.yml with every role's
  min_ansible_version and with the pinned ansible-core; the EE's pins with requirements.txt.
- requirements.txt is what a controller needs (no test tools); requirements-dev.txt adds the tools.
- LICENSE ships the GPL-3.0 text galaxy.yml names; no placeholder URLs.
- No tracked file points outside the repository.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

import ansible_collections
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
# What ships and runs on a user's fleet; everything else (extensions/molecule/, tests/, the simulated lab's
# inventory) only serves the tests.
PRODUCT_DIRS = ("roles/", "plugins/", "playbooks/", "inventories/lab/")
PRODUCT_FILES = ("site.yml",)
TEST_DIRS = ("extensions/molecule/", "tests/", "inventories/local/")
# test tools that must never reach a user's controller or the execution environment
DEV_TOOLS = {"molecule", "molecule-plugins", "ansible-lint", "pytest", "pytest-testinfra", "ruff", "yamllint", "scipy"}
BUILTIN = {"ansible.builtin", "gpufleet.sglang"}
FQCN = re.compile(r"\b([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\b")


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line and not line.startswith("collections/")]


def load(path: str) -> dict:
    return yaml.safe_load((REPO / path).read_text())


def installed_collections() -> set[str]:
    """Collections the `ansible` package of requirements.txt carries (the test toolchain's source)."""
    found = set()
    for root in ansible_collections.__path__:
        for ns in Path(root).iterdir():
            if ns.is_dir():
                found.update(f"{ns.name}.{c.name}" for c in ns.iterdir() if (c / "MANIFEST.json").is_file())
    return found


def strip_comments(text: str, suffix: str) -> str:
    if suffix in (".yml", ".yaml", ".j2"):
        return "\n".join(line.split(" #")[0] for line in text.splitlines() if not line.lstrip().startswith("#"))
    return text


def plugins_used(paths: Iterable[str], known: set[str]) -> set[str]:
    """`ns.name.plugin` of every reference (tasks, filters, connections) in YAML and Jinja files, and
    `ns.name` of every `ansible_collections.<ns>.<name>` import in Python files. Only names of
    collections that exist count, so `sglang_facts.a.b` and other dotted variables are not mistaken
    for one; comments and Python docstrings that merely mention a collection do not count."""
    used: set[str] = set()
    for path in paths:
        suffix = Path(path).suffix
        if suffix == ".py":
            text = (REPO / path).read_text()
            used.update(f"{ns}.{name}" for ns, name in re.findall(r"ansible_collections\.(\w+)\.(\w+)", text))
        elif suffix in (".yml", ".yaml", ".j2"):
            text = strip_comments((REPO / path).read_text(), suffix)
            used.update(".".join(m) for m in FQCN.findall(text) if f"{m[0]}.{m[1]}" in known)
    return used


def collections_used(paths: Iterable[str], known: set[str]) -> set[str]:
    return {".".join(ref.split(".")[:2]) for ref in plugins_used(paths, known)}


def version_added(fqcn: str) -> Version | None:
    """The top-level `version_added` of an installed plugin's documentation (None when absent)."""
    ns, name, plugin = fqcn.split(".")
    for root in ansible_collections.__path__:
        for source in sorted(Path(root, ns, name, "plugins").glob(f"*/{plugin}.py")):
            found = re.search(r"^version_added:\s*['\"]?([0-9.]+)", source.read_text(), re.MULTILINE)
            if found:
                return Version(found.group(1))
    return None


@pytest.fixture(scope="module")
def files() -> list[str]:
    return tracked()


@pytest.fixture(scope="module")
def known() -> set[str]:
    return installed_collections() | BUILTIN


def test_fqcn_scan_finds_a_use_and_ignores_a_mention(tmp_path: Path, known: set[str]) -> None:
    # the scanner the next tests rely on: a filter in a task counts, a comment and a variable do not
    probe = REPO / "tests" / "output" / "fqcn_probe.yml"
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text(
        "# community.proxmox.proxmox is mentioned here only\n"
        "- ansible.builtin.debug:\n"
        '    msg: "{{ [1, 1] | community.general.counter }} {{ sglang_facts.release.id }}"\n'
    )
    try:
        assert collections_used(["tests/output/fqcn_probe.yml"], known) == {"ansible.builtin", "community.general"}
    finally:
        probe.unlink()


def test_declared_collections_are_exactly_the_used_ones(files: list[str], known: set[str]) -> None:
    product = [f for f in files if f.startswith(PRODUCT_DIRS) or f in PRODUCT_FILES]
    used = collections_used(product, known) - BUILTIN
    galaxy = set(load("galaxy.yml")["dependencies"])
    requirements = {c["name"] for c in load("requirements.yml")["collections"]}
    ee = {c["name"] for c in load("meta/ee-requirements.yml")["collections"]}
    assert galaxy == used, f"galaxy.yml dependencies {sorted(galaxy)} != used by the product {sorted(used)}"
    assert requirements == used, f"requirements.yml {sorted(requirements)} != used {sorted(used)}"
    assert ee == used, f"meta/ee-requirements.yml {sorted(ee)} != used {sorted(used)}"


def test_declared_floors_cover_every_plugin_used(files: list[str], known: set[str]) -> None:
    product = [f for f in files if f.startswith(PRODUCT_DIRS) or f in PRODUCT_FILES]
    ranges = load("galaxy.yml")["dependencies"]
    checked = 0
    for ref in sorted(r for r in plugins_used(product, known) if r.count(".") == 2):
        collection = ".".join(ref.split(".")[:2])
        added = version_added(ref) if collection in ranges else None
        if added is None:
            continue
        floor = next(Version(s.version) for s in SpecifierSet(ranges[collection]) if s.operator == ">=")
        assert floor >= added, f"{ref} was added in {collection} {added}; galaxy.yml declares {ranges[collection]}"
        checked += 1
    assert checked, "no used plugin with a version_added found: the floor check checked nothing"


def test_test_only_collections_come_with_the_toolchain(files: list[str], known: set[str]) -> None:
    tests_only = collections_used([f for f in files if f.startswith(TEST_DIRS)], known) - BUILTIN
    assert tests_only, "the scan found no collection in extensions/molecule/, tests/ and inventories/local/"
    missing = tests_only - installed_collections()
    assert not missing, f"tests use {sorted(missing)}, which the `ansible` package of requirements.txt lacks"


def installed_version(collection: str) -> Version:
    """The version of an installed collection (from the `ansible` package of the running toolchain)."""
    for root in ansible_collections.__path__:
        manifest = Path(root, *collection.split("."), "MANIFEST.json")
        if manifest.is_file():
            return Version(yaml.safe_load(manifest.read_text())["collection_info"]["version"])
    raise AssertionError(f"{collection} is not installed in this toolchain")


def on_pinned_toolchain() -> bool:
    """True on the toolchain of requirements.txt (make venv), False on another one (requirements-newest.txt)."""
    return Version(importlib.metadata.version("ansible")) in pins("requirements.txt")["ansible"].specifier


def test_pinned_collections_satisfy_the_declared_ranges() -> None:
    ranges = load("galaxy.yml")["dependencies"]
    assert ranges == {c["name"]: c["version"] for c in load("requirements.yml")["collections"]}
    for entry in load("meta/ee-requirements.yml")["collections"]:
        pinned = Version(entry["version"])
        assert pinned in SpecifierSet(ranges[entry["name"]]), f"EE pins {entry} outside {ranges[entry['name']]}"
        installed = installed_version(entry["name"])
        # every toolchain the collection supports carries collections inside the declared ranges
        assert installed in SpecifierSet(ranges[entry["name"]]), (
            f"this toolchain's {entry['name']} {installed} is outside galaxy.yml's {ranges[entry['name']]}"
        )
        if on_pinned_toolchain():
            # the EE and a pip-installed controller (the `ansible` package) run the same collection code
            assert installed == pinned, entry


def pins(path: str) -> dict[str, Requirement]:
    reqs = {}
    for raw in (REPO / path).read_text().splitlines():
        line = raw.split("#")[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            reqs[req.name.lower()] = req
    return reqs


def test_requirements_split_users_from_developers() -> None:
    runtime = pins("requirements.txt")
    assert {"ansible-core", "ansible", "paramiko", "jinja2", "pyyaml", "ansible-runner"} <= set(runtime)
    assert not DEV_TOOLS & set(runtime), f"test tools in requirements.txt: {sorted(DEV_TOOLS & set(runtime))}"
    for req in runtime.values():
        assert str(req.specifier).startswith("=="), f"requirements.txt: {req} is not pinned"
    dev_text = (REPO / "requirements-dev.txt").read_text()
    assert "-r requirements.txt" in dev_text.splitlines()
    assert DEV_TOOLS | {"ansible-builder"} <= set(pins("requirements-dev.txt"))
    makefile = (REPO / "Makefile").read_text()
    # make venv installs requirements-dev.txt into .venv (with uv)
    assert re.search(r"\$\(UV\) pip install -q .*--python \$\(PY\) .*-r requirements-dev\.txt", makefile)


def test_versions_agree() -> None:
    galaxy = load("galaxy.yml")
    releases = load("changelogs/changelog.yaml")["releases"]
    newest = max(releases, key=Version)
    assert newest == galaxy["version"], f"changelogs/changelog.yaml {newest} != galaxy.yml {galaxy['version']}"
    # CHANGELOG.md is rendered from it by antsibull-changelog (make changelog; make lint checks it is current)
    top = re.search(r"^## v(\S+)", (REPO / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert top, "CHANGELOG.md has no version heading"
    assert top.group(1).replace("\\", "") == newest, f"CHANGELOG.md {top.group(1)} != {newest}"

    requires = SpecifierSet(load("meta/runtime.yml")["requires_ansible"])
    core = Version(str(pins("requirements.txt")["ansible-core"].specifier).lstrip("="))
    assert core in requires, f"pinned ansible-core {core} outside meta/runtime.yml {requires}"
    floor = next(s.version for s in requires if s.operator == ">=")
    for meta in sorted(REPO.glob("roles/*/meta/main.yml")):
        info = yaml.safe_load(meta.read_text())["galaxy_info"]
        assert Version(str(info["min_ansible_version"])) == Version(floor), f"{meta}: {info['min_ansible_version']}"
        assert info["license"] == galaxy["license"][0], meta

    ee = load("execution-environment.yml")["dependencies"]
    runtime = pins("requirements.txt")
    assert ee["ansible_core"]["package_pip"] == f"ansible-core{runtime['ansible-core'].specifier}"
    assert ee["ansible_runner"]["package_pip"] == f"ansible-runner{runtime['ansible-runner'].specifier}"
    # the controller's pinned paramiko is one the collection's EE metadata accepts
    ee_paramiko = pins("meta/ee-requirements.txt")["paramiko"]
    assert Version(str(runtime["paramiko"].specifier).lstrip("=")) in ee_paramiko.specifier


def test_both_toolchains_lie_in_the_declared_range() -> None:
    """requirements.txt (the oldest supported ansible-core) and requirements-newest.txt (the newest) are
    both inside meta/runtime.yml's requires_ansible; the newest pins only ansible-core and ansible (the
    Makefile takes every other pin from requirements.txt and requirements-dev.txt), and the toolchain
    running these tests is one of the two."""
    requires = SpecifierSet(load("meta/runtime.yml")["requires_ansible"])
    newest = pins("requirements-newest.txt")
    assert set(newest) == {"ansible-core", "ansible"}, f"requirements-newest.txt pins {sorted(newest)}"
    for req in newest.values():
        assert str(req.specifier).startswith("=="), f"requirements-newest.txt: {req} is not pinned"
    oldest = pins("requirements.txt")
    for name, found in (("requirements.txt", oldest), ("requirements-newest.txt", newest)):
        core = Version(str(found["ansible-core"].specifier).lstrip("="))
        assert core in requires, f"{name}: ansible-core {core} outside meta/runtime.yml {requires}"
    assert Version(str(newest["ansible-core"].specifier).lstrip("=")) > Version(
        str(oldest["ansible-core"].specifier).lstrip("=")
    ), "requirements-newest.txt's ansible-core is not newer than requirements.txt's"
    running = {name: importlib.metadata.version(name) for name in ("ansible-core", "ansible")}
    assert any(all(Version(running[n]) in found[n].specifier for n in running) for found in (oldest, newest)), (
        f"this toolchain runs {running}: neither requirements.txt nor requirements-newest.txt"
    )
    makefile = (REPO / "Makefile").read_text()
    assert "-r requirements-newest.txt" in makefile, "the Makefile does not build the newest toolchain"


def test_sanity_ignores_cover_both_toolchains() -> None:
    """ansible-test reads tests/sanity/ignore-<core major.minor>.txt of the running ansible-core only: each
    toolchain's core has its file, and they say the same (one list, written once per version)."""
    files = {}
    for name in ("requirements.txt", "requirements-newest.txt"):
        core = Version(str(pins(name)["ansible-core"].specifier).lstrip("="))
        files[name] = REPO / "tests" / "sanity" / f"ignore-{core.major}.{core.minor}.txt"
        assert files[name].is_file(), f"{name}: ansible-core {core} has no {files[name].relative_to(REPO)}"
    texts = {path.read_text() for path in files.values()}
    assert len(texts) == 1, f"{sorted(str(p.relative_to(REPO)) for p in files.values())} differ"


def test_license_and_urls() -> None:
    galaxy = load("galaxy.yml")
    assert galaxy["license"] == ["GPL-3.0-or-later"]
    text = (REPO / "LICENSE").read_text()
    assert "GNU GENERAL PUBLIC LICENSE" in text
    assert "Version 3, 29 June 2007" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "LICENSE" not in galaxy.get("build_ignore", [])
    urls = {key: galaxy[key] for key in ("repository", "documentation", "homepage", "issues") if key in galaxy}
    assert {"repository", "issues"} <= set(urls)
    for key, url in urls.items():
        assert url.startswith(galaxy["repository"]), f"galaxy.yml {key}: {url} is not under {galaxy['repository']}"
        assert not re.search(r"example\.|invalid|localhost|TODO|changeme", url), f"placeholder in {key}: {url}"


# built from pieces so this file does not match itself
OUTSIDE = re.compile("|".join(re.escape(s) for s in ("FACTS" + ".md", "DESIGN" + ".md", "/work" + "/", "shared" + "/")))


def test_no_file_points_outside_the_repository(files: list[str]) -> None:
    hits = []
    for path in files:
        full = REPO / path
        if full.is_symlink() or not full.is_file():
            continue
        try:
            text = full.read_text()
        except UnicodeDecodeError:
            continue
        hits += [f"{path}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, "files point outside the repository:\n" + "\n".join(hits)


def test_the_outside_pointer_check_can_fail() -> None:
    assert OUTSIDE.search("see " + "FACTS" + ".md section 3")
    assert OUTSIDE.search("From /work" + "/sha" + "red/fixtures/nvidia")
    assert not OUTSIDE.search("/usr/share/common-licenses/GPL-3")
