"""Write each role's README variable tables from its argument specs; check that nothing disagrees.

    python tools/role_docs/role_docs.py write [ROLE ...]   # rewrite the marked README sections
    python tools/role_docs/role_docs.py check [ROLE ...]   # exit 1, with a diff and every mismatch

meta/argument_specs.yml is the one source of a role variable's documentation: every role README
holds, between the role_docs markers, the tables `write` generates from it, and `check` renders
them again and shows the diff against the README (a hand edit, or a spec changed without `write`).

What a diff cannot show is checked on its own. Ansible never applies the `default` of a spec: the
value comes from defaults/main.yml (the role's own, and those of its meta dependencies, which
Ansible merges under it), and the spec's default is documentation only (what the tables,
antsibull-docs and ansible-doc show). So:

- every public variable of defaults/main.yml is an option of an entry point, and every option with a
  `default` is set in defaults/main.yml or in a meta dependency's (a role of this collection, e.g.
  sglang_common for sglang_root), to that value, of the spec's type; a Jinja default (`{{ ... }}`)
  is either given verbatim or left out of the spec (its description says it);
- a role that hands its options to a module (MODULE_SPECS: `throughput_gate_<option>` ->
  `<option>` of the throughput_gate module, or another name listed in MODULE_OPTION_NAMES:
  `throughput_gate_served_model_name` -> `model`) leaves the module's defaults to the module: an option
  it does not set in defaults/main.yml states the module's default in its spec (the same value, or
  none when the module has none), and defaults/main.yml never restates a module default;
- an option declared by several entry points has the same type, elements, default and choices in each;
- every `tasks_from` of an include_role/import_role (in roles/, playbooks/, extensions/, tests/,
  site.yml) names an entry point the role declares in meta/argument_specs.yml: the other files of a
  role are its own (`check` without role names).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
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


# Roles whose options go to a module as `<prefix><option> | default(omit)`: role -> (prefix, the
# module_utils file that holds the module's argument spec, its name there). The module's spec is
# the one place of those defaults.
MODULE_SPECS: dict[str, tuple[str, str, str]] = {
    "throughput_gate": ("throughput_gate_", "gate.spec", "ARGUMENT_SPEC"),
}
# Role options that name a module option by another word (docs/glossary.md's word for the role's
# users, the module's own option name): role option -> module option.
MODULE_OPTION_NAMES: dict[str, dict[str, str]] = {
    "throughput_gate": {"throughput_gate_served_model_name": "model"},
}


@dataclass
class ModuleSpec:
    """The argument spec of the module a role's options go to, and how role options name them."""

    prefix: str
    spec: dict[str, dict[str, Any]]
    source: str
    names: dict[str, str] = field(default_factory=dict)

    def option(self, name: str) -> dict[str, Any] | None:
        """The module option behind role option ``name``, or None."""
        if name in self.names:
            return self.spec.get(self.names[name])
        if not name.startswith(self.prefix):
            return None
        return self.spec.get(name[len(self.prefix) :])


def module_spec(role_name: str) -> ModuleSpec | None:
    if role_name not in MODULE_SPECS:
        return None
    prefix, module, attr = MODULE_SPECS[role_name]
    collections = str(REPO / "collections")
    if collections not in sys.path:
        sys.path.insert(0, collections)
    loaded = importlib.import_module(f"ansible_collections.gpufleet.sglang.plugins.module_utils.{module}")
    return ModuleSpec(
        prefix,
        getattr(loaded, attr),
        f"plugins/module_utils/{module.replace('.', '/')}.py {attr}",
        MODULE_OPTION_NAMES.get(role_name, {}),
    )


@dataclass
class Role:
    name: str
    path: Path
    defaults: dict[str, Any]
    specs: dict[str, dict[str, Any]]
    readme: str
    module: ModuleSpec | None = None
    # defaults of the role's meta dependencies (this collection's roles), merged under its own
    inherited: dict[str, Any] = field(default_factory=dict)

    @property
    def spec_file(self) -> str:
        return f"roles/{self.name}/meta/argument_specs.yml"

    @property
    def defaults_file(self) -> str:
        return f"roles/{self.name}/defaults/main.yml"

    @property
    def readme_file(self) -> str:
        return f"roles/{self.name}/README.md"

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
    role.module = module_spec(path.name)
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
    for name, value in {**role.inherited, **role.defaults}.items():
        if not name.startswith("__"):
            errors += check_default(role, name, value)
    for name, entries in role.options.items():
        errors += check_option(role, name, entries)
    return errors


def check_default(role: Role, name: str, value: Any) -> list[str]:
    """A public variable of defaults/main.yml against the option of each entry point declaring it."""
    entries = role.options.get(name)
    if not entries:
        if name not in role.defaults:  # a dependency's variable is that role's option
            return []
        return [f"{role.defaults_file}: {name} is not an option of any entry point in {role.spec_file}"]
    source = role.defaults_file if name in role.defaults else "a meta dependency's defaults/main.yml"
    errors = []
    for entry, opt in entries:
        errors += default_errors(f"{role.spec_file}: {entry}.{name}", opt, value, source)
    return errors


def default_errors(where: str, opt: dict[str, Any], value: Any, defaults_file: str) -> list[str]:
    """One option's spec `default` and type against the value defaults/main.yml sets."""
    errors = []
    spec_type = opt.get("type", "str")
    if "default" not in opt:
        if not is_template(value) and value is not None and not opt.get("required"):
            errors.append(f"{where} has no default, but {defaults_file} sets {json.dumps(value)}")
    elif not same_value(spec_type, opt["default"], value):
        errors.append(f"{where} says default {json.dumps(opt['default'])}, {defaults_file} sets {json.dumps(value)}")
    if not of_type(spec_type, value):
        errors.append(f"{where} is type {spec_type}, {defaults_file} sets {json.dumps(value)}")
    return errors


def of_type(spec_type: str, value: Any) -> bool:
    """Whether a defaults/main.yml value is of the spec's type (null, a template or an unknown type pass)."""
    if value is None or is_template(value) or spec_type not in TYPES:
        return True
    return isinstance(value, TYPES[spec_type]) and not (spec_type in ("int", "float") and isinstance(value, bool))


def check_option(role: Role, name: str, entries: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """An option's spec default is set in defaults/main.yml, and every entry point declares it alike."""
    errors = []
    for entry, opt in entries:
        set_by_role = name in role.defaults or name in role.inherited
        if "default" in opt and not set_by_role and not (role.module and role.module.option(name)):
            errors.append(
                f"{role.spec_file}: {entry}.{name} says default {json.dumps(opt['default'])} but "
                f"{role.defaults_file} does not set it, nor does a meta dependency "
                "(Ansible takes defaults from those files only)"
            )
    first_entry, first = entries[0]
    for entry, opt in entries[1:]:
        for key in ("type", "default", "choices", "elements"):
            if opt.get(key) != first.get(key):
                errors.append(f"{role.spec_file}: {name}: {key} differs between entry points {first_entry} and {entry}")
    return errors


def same_default(spec_type: str | None, one: Any, other: Any) -> bool:
    """Two defaults of an option of ``spec_type`` are the same value (``1800`` and ``1800.0`` for a float)."""
    if spec_type in ("int", "float"):
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (one, other))
        return numbers and float(one) == float(other)
    return same_value(spec_type, one, other)


def check_module_defaults(role: Role) -> list[str]:
    """Options a role leaves to its module state the module's default; defaults/main.yml restates none."""
    module = role.module
    if module is None:
        return []
    errors = []
    for name, entries in role.options.items():
        mod = module.option(name)
        if mod is None:
            continue
        mod_type = str(mod.get("type", "str"))
        if name in role.defaults or name in role.inherited:  # the role (or a meta dependency) computes it
            value = role.defaults.get(name, role.inherited.get(name))
            if "default" in mod and not is_template(value) and same_default(mod_type, mod["default"], value):
                errors.append(
                    f"{role.defaults_file}: {name} restates the module's default {json.dumps(mod['default'])} "
                    f"({module.source}); leave it out, the role passes it as default(omit)"
                )
            continue
        for entry, opt in entries:
            where = f"{role.spec_file}: {entry}.{name}"
            if "default" not in mod:
                if "default" in opt:
                    errors.append(
                        f"{where} says default {json.dumps(opt['default'])}, but the module option "
                        f"{name[len(module.prefix) :]} has none ({module.source})"
                    )
            elif "default" not in opt:
                errors.append(
                    f"{where} does not state the module's default {json.dumps(mod['default'])} ({module.source})"
                )
            elif not same_default(mod_type, mod["default"], opt["default"]):
                errors.append(
                    f"{where} says default {json.dumps(opt['default'])}, the module's default is "
                    f"{json.dumps(mod['default'])} ({module.source})"
                )
    return errors


def cell(text: str) -> str:
    """Text as one table cell: on one line, every `|` escaped (with the backslashes before it, which
    would otherwise escape the escape), so a spec's text never ends a cell or a row early."""
    one_line = re.sub(r"\s*[\r\n]+\s*", " ", text)
    return re.sub(r"(\\*)\|", lambda m: "\\" * (2 * len(m.group(1))) + "\\|", one_line)


def code(text: str) -> str:
    """Text as a code span: fenced by one backtick more than its longest run of them."""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_default(opt: dict[str, Any]) -> str:
    if "default" not in opt:
        return ""
    value = opt["default"]
    if isinstance(value, str) and value == "":
        return '`""`'
    return code(value if isinstance(value, str) else json.dumps(value))


def markdown(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        kind, inner = m.groups()
        if kind == "I":
            return f"*{inner}*"
        if kind == "B":
            return f"**{inner}**"
        return code(inner)

    return MARKUP.sub(sub, text)


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
            row = (code(str(name)), kind, render_default(opt), description)
            lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    lines += ["", END]
    return "\n".join(lines)


class MarkerError(ValueError):
    """A README without a complete role_docs section."""


def rendered(role: Role) -> str:
    """The README as `write` writes it: the marked section replaced by what `generate` makes of the spec."""
    start = role.readme.find(BEGIN)
    end = role.readme.find(END, start) if start >= 0 else -1
    if end < 0:
        raise MarkerError(
            f"{role.readme_file} has no '{BEGIN}' ... '{END}' section; put the markers where the variable tables go"
        )
    return role.readme[:start] + generate(role) + role.readme[end + len(END) :]


def check_readme(role: Role) -> list[str]:
    """The README against what `write` would write, as a unified diff."""
    if not role.readme:
        return [f"{role.readme_file} is missing"]
    try:
        text = rendered(role)
    except MarkerError as error:
        return [str(error)]
    if text == role.readme:
        return []
    diff = difflib.unified_diff(
        role.readme.splitlines(keepends=True),
        text.splitlines(keepends=True),
        f"{role.readme_file}",
        f"{role.readme_file} (from {role.spec_file})",
    )
    fix = f"'python tools/role_docs/role_docs.py write {role.name}' or 'make role-docs-write'"
    head = f"{role.readme_file}: the variable tables differ from {role.spec_file} (edit the spec, then run {fix}):"
    return [head + "\n" + "".join(diff).rstrip("\n")]


# Where include_role/import_role tasks live: every tasks_from there names a declared entry point.
TASK_SOURCES = ("roles", "playbooks", "extensions", "tests", "site.yml")
INCLUDE_KEYS = {f"{prefix}{verb}_role" for prefix in ("", "ansible.builtin.") for verb in ("include", "import")}


def role_includes(data: Any) -> list[tuple[str, str]]:
    """(role name, tasks_from) of every include_role/import_role with a literal tasks_from in parsed YAML."""
    found: list[tuple[str, str]] = []
    if isinstance(data, list):
        for item in data:
            found += role_includes(item)
    elif isinstance(data, dict):
        for key, value in data.items():
            if key in INCLUDE_KEYS and isinstance(value, dict) and "tasks_from" in value and "name" in value:
                tasks_from = str(value["tasks_from"])
                if "{{" not in tasks_from:
                    found.append((str(value["name"]).rsplit(".", maxsplit=1)[-1], tasks_from))
            else:
                found += role_includes(value)
    return found


def tasks_from_errors(repo: Path) -> list[str]:
    """Every tasks_from of a role of this collection names an entry point of its meta/argument_specs.yml."""
    errors = []
    files = []
    for source in TASK_SOURCES:
        path = repo / source
        files += [path] if path.is_file() else sorted(path.rglob("*.yml")) if path.is_dir() else []
    for file in files:
        try:
            documents = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue  # not an Ansible file (ansible-lint and yamllint read these)
        for role_name, tasks_from in role_includes(documents):
            spec = repo / "roles" / role_name / "meta" / "argument_specs.yml"
            if not spec.is_file():
                continue
            entries = (yaml.safe_load(spec.read_text(encoding="utf-8")) or {}).get("argument_specs") or {}
            if tasks_from not in entries:
                errors.append(
                    f"{file.relative_to(repo)}: tasks_from {tasks_from} of role {role_name} is not an entry point of "
                    f"roles/{role_name}/meta/argument_specs.yml (declared: {', '.join(entries)}); declare it there, "
                    "or name a declared one (without .yml)"
                )
    return errors


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
            try:
                text = rendered(role)
            except MarkerError as error:
                print(f"role_docs: {error}")
                errors.append(role.name)
                continue
            if text != role.readme:
                (path / "README.md").write_text(text, encoding="utf-8")
                print(f"role_docs: wrote roles/{role.name}/README.md")
            continue
        errors += check_specs(role) + check_module_defaults(role) + check_readme(role)
    if args.command == "check" and not args.roles:
        errors += tasks_from_errors(args.roles_dir.parent)
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
