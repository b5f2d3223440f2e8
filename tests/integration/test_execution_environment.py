"""The execution environment holds what a controller needs at run time and nothing of the test toolchain.

- `ansible-builder create` on execution-environment.yml (what `make ee` runs) writes a build context
  whose Python requirements, collections and ansible-core/ansible-runner pins are exactly the
  runtime dependencies.
- `ansible-builder introspect` on an EE's collection tree with the built gpufleet.sglang tarball
  installed (what ansible-builder does inside any EE that includes the collection) finds paramiko
  (proxmox_pct_remote) and matplotlib (the fleet report's charts) from our
  meta/execution-environment.yml, and not the root requirements.txt (ansible-core and the
  `ansible` package have no place inside an EE).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import ansible_collections
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# the tools of the venv running the tests (also when PATH does not name it)
BIN = Path(sys.executable).parent
# the controller-side packages an EE needs: paramiko (proxmox_pct_remote), matplotlib (fleet_report)
RUNTIME = {"paramiko", "matplotlib"}
DEV_TOOLS = re.compile(
    r"\b(molecule|ansible-lint|pytest|testinfra|ruff|yamllint|scipy|ansible-builder)\b", re.IGNORECASE
)


def run(argv: list, cwd: Path) -> subprocess.CompletedProcess:
    # no ANSIBLE_* from the caller and no ansible.cfg of the checkout: a clean controller
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    result = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{argv}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def names(lines: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", line.strip(), maxsplit=1)[0].lower() for line in lines if line.strip()}


def requirement_lines(path: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> Path:
    ctx = tmp_path_factory.mktemp("ee") / "context"
    run([BIN / "ansible-builder", "create", "-f", REPO / "execution-environment.yml", "-c", ctx], cwd=ctx.parent)
    return ctx


def test_build_context_holds_exactly_the_runtime_dependencies(context: Path) -> None:
    build = context / "_build"
    python = requirement_lines(build / "requirements.txt")
    assert names(python) == RUNTIME, python
    collections = {
        c["name"]: c["version"] for c in yaml.safe_load((build / "requirements.yml").read_text())["collections"]
    }
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert set(collections) == set(galaxy["dependencies"]), collections
    containerfile = (context / "Containerfile").read_text()
    pinned = dict(re.findall(r"^(ansible-core|ansible-runner)==(\S+)", (REPO / "requirements.txt").read_text(), re.M))
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"', containerfile, re.M)
    assert refs, containerfile[:2000]
    assert set(refs.group(1).split()) == {f"{name}=={version}" for name, version in pinned.items()}
    # nothing of the test toolchain anywhere in the context
    leaked = [
        f"{path.relative_to(context)}: {m.group(0)}"
        for path in context.rglob("*")
        if path.is_file() and path.parent.name != "scripts"
        for m in DEV_TOOLS.finditer(path.read_text())
    ]
    assert not leaked, leaked


def test_collections_in_an_ee_declare_their_runtime_not_the_controller_stack(tmp_path: Path) -> None:
    run([BIN / "ansible-galaxy", "collection", "build", "--output-path", tmp_path, REPO], cwd=tmp_path)
    (tarball,) = tmp_path.glob("gpufleet-sglang-*.tar.gz")
    tree = tmp_path / "ee-collections"
    run(
        [BIN / "ansible-galaxy", "collection", "install", "--offline", "--no-deps", "--force", "-p", tree, tarball],
        cwd=tmp_path,
    )
    # the dependencies as the EE installs them (same versions as the `ansible` package carries)
    for fqcn in yaml.safe_load((REPO / "galaxy.yml").read_text())["dependencies"]:
        ns, name = fqcn.split(".")
        src = next(Path(root, ns, name) for root in ansible_collections.__path__ if Path(root, ns, name).is_dir())
        shutil.copytree(src, tree / "ansible_collections" / ns / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = run([BIN / "ansible-builder", "introspect", "--sanitize", tree], cwd=tmp_path).stdout
    data = yaml.safe_load(out)
    ours = [line for line in data["python"] if "from collection gpufleet.sglang" in line]
    assert names([line.split("#")[0] for line in ours]) == RUNTIME, data
    everything = names([line.split("#")[0] for line in data["python"]])
    assert not everything & {"ansible-core", "ansible", "ansible-runner", "jinja2", "pyyaml"}, data
    assert not [line for line in data["python"] + data["system"] if DEV_TOOLS.search(line.split("#")[0])], data
