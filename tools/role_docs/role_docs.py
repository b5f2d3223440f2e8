"""Check that each role's defaults, argument specs and README agree; write README variable tables.

    python tools/role_docs/role_docs.py check [ROLE ...]   # exit 1 and name every mismatch
    python tools/role_docs/role_docs.py write [ROLE ...]   # rewrite the marked README sections

Ansible never applies the `default` of a role's meta/argument_specs.yml: the value comes from
defaults/main.yml (the role's own, and those of its meta dependencies, which Ansible merges under
it), and the spec's default is documentation only (it is what antsibull-docs and ansible-doc show).
So both must say the same, and so must the README. The rules (README.md here):

- every public variable of defaults/main.yml is an option of an entry point, and every option with a
  `default` is set in defaults/main.yml or in a meta dependency's (a role of this collection, e.g.
  sglang_common for sglang_root), to that value, of the spec's type; a Jinja default (`{{ ... }}`)
  is either given verbatim or left out of the spec (its description says it);
- an option declared by several entry points has the same default, type and description in each;
- the README names every public option; every `<role>_...` name it shows in backticks exists (an
  option, a default, or a fact/register the role's tasks set); a table row `| `var` | default | ...`
  shows the spec's default;
- a README section between the role_docs markers is exactly what `write` generates from the spec.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BEGIN = "<!-- role_docs: begin (generated from meta/argument_specs.yml by tools/role_docs/role_docs.py write) -->"
END = "<!-- role_docs: end -->"
TYPES: dict[str, tuple[type, ...]] = {
    "bool": (bool,),
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "path": (str,),
    "list": (list,),
    "dict": (dict,),
}
MARKUP = re.compile(r"\b([CIBMOVU])\(([^()]*)\)")


@dataclass
class Role:
    name: str
    path: Path
    defaults: dict[str, Any]
    specs: dict[str, dict[str, Any]]
    readme: str
    task_names: set[str] = field(default_factory=set)
    # defaults of the role's meta dependencies (this collection's roles), merged under its own
    inherited: dict[str, Any] = field(default_factory=dict)

    @property
    def options(self) -> dict[str, list[tuple[str, dict[str, Any]]]]:
        """option name -> [(entry point, option spec)] over all entry points."""
        found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for entry, spec in self.specs.items():
            for name, opt in (spec.get("options") or {}).items():
                found.setdefault(name, []).append((entry, opt))
        return found


def load_role(path: Path) -> Role:
    def read_yaml(rel: str) -> Any:
        file = path / rel
        return yaml.safe_load(file.read_text(encoding="utf-8")) if file.is_file() else None

    defaults = read_yaml("defaults/main.yml") or {}
    specs = (read_yaml("meta/argument_specs.yml") or {}).get("argument_specs") or {}
    readme_path = path / "README.md"
    readme = readme_path.read_text(encoding="utf-8") if readme_path.is_file() else ""
    role = Role(path.name, path, defaults, specs, readme)
    role.task_names = names_set_by_tasks(path)
    role.inherited = dependency_defaults(path)
    return role


def dependency_defaults(path: Path, seen: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Defaults a role gets from its meta dependencies (roles of this collection, next to it), deepest first."""
    meta = path / "meta" / "main.yml"
    data = yaml.safe_load(meta.read_text(encoding="utf-8")) if meta.is_file() else None
    merged: dict[str, Any] = {}
    for dep in (data or {}).get("dependencies") or []:
        name = str(dep.get("role", dep.get("name", "")) if isinstance(dep, dict) else dep).rsplit(".", maxsplit=1)[-1]
        dep_path = path.parent / name
        if name in seen or not (dep_path / "defaults" / "main.yml").is_file():
            continue
        merged.update(dependency_defaults(dep_path, seen | {path.name}))
        merged.update(yaml.safe_load((dep_path / "defaults" / "main.yml").read_text(encoding="utf-8")) or {})
    return merged


def names_set_by_tasks(path: Path) -> set[str]:
    """Variables a role's tasks and handlers create: set_fact keys, register names, task vars."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in ("ansible.builtin.set_fact", "set_fact", "vars") and isinstance(value, dict):
                    names.update(k for k in value if isinstance(k, str))
                elif key == "register" and isinstance(value, str):
                    names.add(value)
                walk(value)

    for sub in ("tasks", "handlers", "vars"):
        for file in sorted((path / sub).glob("*.yml")):
            data = yaml.safe_load(file.read_text(encoding="utf-8"))
            if sub == "vars" and isinstance(data, dict):
                names.update(data)
            walk(data)
    return names


def is_template(value: Any) -> bool:
    """A Jinja expression, or a list/dict holding one: Ansible computes it when it is used."""
    if isinstance(value, list):
        return any(is_template(v) for v in value)
    if isinstance(value, dict):
        return any(is_template(v) for v in value.values())
    return isinstance(value, str) and "{{" in value


def same_value(spec_type: str | None, default: Any, value: Any) -> bool:
    if spec_type in ("str", "path") and not isinstance(default, (list, dict)) and not isinstance(value, (list, dict)):
        return default is not None and value is not None and str(default) == str(value)
    return type(default) is type(value) and default == value


def text_of(description: Any) -> str:
    parts = description if isinstance(description, list) else [description or ""]
    return " ".join(str(p).strip() for p in parts)


def check_specs(role: Role) -> list[str]:
    errors = []
    spec_file = f"roles/{role.name}/meta/argument_specs.yml"
    defaults_file = f"roles/{role.name}/defaults/main.yml"
    options = role.options
    effective = {**role.inherited, **role.defaults}
    for name, value in effective.items():
        if name.startswith("__"):
            continue
        if name not in options:
            if name in role.defaults:  # a dependency's variable is that role's option
                errors.append(f"{defaults_file}: {name} is not an option of any entry point in {spec_file}")
            continue
        source = defaults_file if name in role.defaults else "a meta dependency's defaults/main.yml"
        for entry, opt in options[name]:
            where = f"{spec_file}: {entry}.{name}"
            spec_type = opt.get("type", "str")
            if "default" not in opt:
                if not is_template(value) and value is not None and not opt.get("required"):
                    errors.append(f"{where} has no default, but {source} sets {json.dumps(value)}")
            elif not same_value(spec_type, opt["default"], value):
                errors.append(f"{where} says default {json.dumps(opt['default'])}, {source} sets {json.dumps(value)}")
            if value is not None and not is_template(value) and spec_type in TYPES:
                ok = isinstance(value, TYPES[spec_type]) and not (
                    spec_type in ("int", "float") and isinstance(value, bool)
                )
                if not ok:
                    errors.append(f"{where} is type {spec_type}, {source} sets {json.dumps(value)}")
    for name, entries in options.items():
        for entry, opt in entries:
            if "default" in opt and name not in effective:
                errors.append(
                    f"{spec_file}: {entry}.{name} says default {json.dumps(opt['default'])} but "
                    f"roles/{role.name}/defaults/main.yml does not set it, nor does a meta dependency "
                    "(Ansible takes defaults from those files only)"
                )
        first_entry, first = entries[0]
        for entry, opt in entries[1:]:
            for key in ("type", "default", "choices", "elements"):
                if opt.get(key) != first.get(key):
                    errors.append(f"{spec_file}: {name}: {key} differs between entry points {first_entry} and {entry}")
    return errors


def render_default(opt: dict[str, Any]) -> str:
    if "default" not in opt:
        return ""
    value = opt["default"]
    if isinstance(value, str) and value == "":
        return '`""`'
    text = value if isinstance(value, str) else json.dumps(value)
    return f"`{text}`"


def markdown(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        kind, inner = m.groups()
        if kind == "I":
            return f"*{inner}*"
        if kind == "B":
            return f"**{inner}**"
        return f"`{inner}`"

    return MARKUP.sub(sub, text).replace("|", "\\|")


def generate(role: Role) -> str:
    lines = [BEGIN]
    for entry, spec in role.specs.items():
        options = spec.get("options") or {}
        if not options:
            continue
        if len(role.specs) > 1:
            lines += ["", f"Entry point `{entry}`:"]
        lines += ["", "| variable | type | default | description |", "|---|---|---|---|"]
        for name, opt in options.items():
            kind = opt.get("type", "str")
            if kind == "list" and opt.get("elements"):
                kind = f"list of {opt['elements']}"
            if opt.get("required"):
                kind += ", required"
            description = markdown(text_of(opt.get("description")))
            if opt.get("choices"):
                description += " Choices: " + ", ".join(f"`{c}`" for c in opt["choices"]) + "."
            lines.append(f"| `{name}` | {kind} | {render_default(opt)} | {description} |")
    lines += ["", END]
    return "\n".join(lines)


def section(readme: str) -> tuple[int, int] | None:
    start = readme.find(BEGIN)
    if start < 0:
        return None
    end = readme.find(END, start)
    if end < 0:
        return (start, -1)
    return (start, end + len(END))


TABLE_ROW = re.compile(r"^\|\s*`([a-z0-9_]+)`\s*\|\s*([^|]*?)\s*\|", re.MULTILINE)
TICKED = re.compile(r"`([a-z][a-z0-9_]*)`")


def check_readme(role: Role) -> list[str]:
    readme_file = f"roles/{role.name}/README.md"
    if not role.readme:
        return [f"{readme_file} is missing"]
    errors = []
    options = role.options
    marked = section(role.readme)
    if marked is not None:
        start, end = marked
        if end < 0:
            errors.append(f"{readme_file}: '{BEGIN}' without '{END}'")
        elif role.readme[start:end] != generate(role):
            errors.append(
                f"{readme_file}: the variable table differs from meta/argument_specs.yml: "
                f"run 'python tools/role_docs/role_docs.py write {role.name}'"
            )
        hand = role.readme[:start] + (role.readme[end:] if end >= 0 else "")
    else:
        hand = role.readme
    mentioned = set(TICKED.findall(role.readme)) | abbreviated(role.readme, set(options))
    public = set(options) | {n for n in role.defaults if not n.startswith("__")}
    for name in sorted(public - mentioned):
        errors.append(f"{readme_file} does not mention `{name}` (an option in meta/argument_specs.yml)")
    known = public | role.task_names | {role.name} | collection_names()
    prefix = role.name + "_"
    # names of another role whose name extends this one (sglang -> sglang_server_*) are that role's
    others = tuple(f"{r}_" for r in collection_names() if r.startswith(prefix))
    shown = {n for n in TICKED.findall(hand) if n.startswith(prefix) and not n.startswith(others)}
    for name in sorted(shown - known):
        errors.append(f"{readme_file} names `{name}`, which is no option, default or fact of the role")
    for name, shown in TABLE_ROW.findall(hand):
        if name not in options:
            continue
        opt = options[name][0][1]
        if "default" not in opt:
            continue
        if not default_shown(opt, shown):
            errors.append(
                f"{readme_file}: the row of `{name}` shows default {shown}, "
                f"meta/argument_specs.yml says {json.dumps(opt['default'])}"
            )
    return errors


ROW = re.compile(r"^\|([^|\n]*)\|", re.MULTILINE)


def abbreviated(readme: str, options: set[str]) -> set[str]:
    """Options a table row names by suffix after a full name: `throughput_gate_tolerance` / `_alpha`."""
    found = set()
    for cell in ROW.findall(readme):
        names = re.findall(r"`(_?[a-z][a-z0-9_]*)`", cell)
        full = next((n for n in names if not n.startswith("_")), None)
        if not full:
            continue
        for short in (n for n in names if n.startswith("_")):
            cuts = [i for i, ch in enumerate(full) if ch == "_"]
            found |= {full[:i] + short for i in cuts if full[:i] + short in options}
    return found


def collection_names() -> set[str]:
    """Roles, modules and filters of the collection (a README may name them)."""
    names = {p.name for p in (REPO / "roles").iterdir() if p.is_dir()}
    for kind in ("modules", "filter", "action"):
        names |= {p.stem for p in (REPO / "plugins" / kind).glob("*.py")}
    return names


def default_shown(opt: dict[str, Any], shown: str) -> bool:
    """Whether a hand-written table cell states the spec's default (or says it in words)."""
    if is_template(opt["default"]):
        return True  # the README says the expression in words (`<release_dir>/venv/bin/python`)
    cell = shown.strip()
    ticks = re.fullmatch(r"`([^`]*)`", cell)
    if not ticks:
        return True  # prose ("from facts", "NVIDIA's ..."): not a value to compare
    inner = ticks.group(1)
    try:
        value = yaml.safe_load(inner)
    except yaml.YAMLError:
        value = inner
    default = opt["default"]
    return same_value(opt.get("type", "str"), default, value) or inner == str(default)


def roles_from(roles_dir: Path, names: list[str]) -> list[Path]:
    if not names:
        return sorted(p for p in roles_dir.iterdir() if (p / "meta" / "argument_specs.yml").is_file())
    paths = []
    for name in names:
        path = roles_dir / name
        if not (path / "meta" / "argument_specs.yml").is_file():
            raise SystemExit(f"role_docs: {path}/meta/argument_specs.yml does not exist")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=["check", "write"])
    parser.add_argument("roles", nargs="*", help="role names (default: every role)")
    parser.add_argument("--roles-dir", type=Path, default=REPO / "roles", help=argparse.SUPPRESS)
    args = parser.parse_intermixed_args(argv)
    errors: list[str] = []
    for path in roles_from(args.roles_dir, args.roles):
        role = load_role(path)
        if args.command == "write":
            marked = section(role.readme)
            if marked is None or marked[1] < 0:
                print(f"role_docs: roles/{role.name}/README.md has no '{BEGIN}' ... '{END}' section; add the markers")
                errors.append(role.name)
                continue
            start, end = marked
            text = role.readme[:start] + generate(role) + role.readme[end:]
            if text != role.readme:
                (path / "README.md").write_text(text, encoding="utf-8")
                print(f"role_docs: wrote roles/{role.name}/README.md")
            continue
        errors += check_specs(role) + check_readme(role)
    if args.command == "check":
        for error in errors:
            print(error, file=sys.stderr)
        if errors:
            print(
                f"role_docs: {len(errors)} mismatch(es) between defaults, argument specs and READMEs", file=sys.stderr
            )
        else:
            print("role_docs: defaults, argument specs and READMEs agree")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
