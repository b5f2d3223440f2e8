# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure functions for passing NVIDIA GPUs into LXC containers (stdlib only).

- which device nodes a container needs for a set of GPUs, from the host's nodes (majors are
  read from the host, never assumed: nvidia-uvm and nvidia-caps majors are dynamic);
- Proxmox VE native ``devN:`` entries (PVE >= 8.1) or raw ``lxc.cgroup2.devices.allow`` +
  ``lxc.mount.entry`` lines;
- plain LXC ``key = value`` lines, with the devices cgroup key chosen from the host's layout;
- an idempotent merge into an existing config that keeps every unrelated byte: lines are split
  on ``\n`` only (as LXC and PVE read them), so CRLF endings, comments holding a form feed, NEL
  or U+2028, and a missing final newline are kept as they were;
- validation of the single-valued ``settings`` a caller adds (no control characters, no section
  syntax, no keys the merge manages or that may appear more than once).

Every cgroup rule names one exact node (``c 195:0 rwm``), never a whole major: with
``195:* rwm`` root in the guest could ``mknod`` a withheld GPU and open it. Mount entries have
no ``optional``: a missing node makes the container fail to start instead of silently
starting without it (nvidia-smi works, CUDA does not).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.confined_path import PathError, relative_name

Entry = tuple[str, str]

PLATFORMS = ("proxmox", "lxc")
PASSTHROUGH = ("native", "raw")
CGROUP_KEYS = {1: "lxc.cgroup.devices.allow", 2: "lxc.cgroup2.devices.allow"}
# Nodes every CUDA container needs besides its GPUs.
REQUIRED_CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
PVE_MAX_DEV_INDEX = 255

_GPU_NODE_RE = re.compile(r"^/dev/nvidia(\d+)$")
_PVE_LINE_RE = re.compile(r"^(?P<key>[A-Za-z0-9_.\-]+):\s?(?P<value>.*)$")
_LXC_LINE_RE = re.compile(r"^\s*(?P<key>[A-Za-z0-9_.\-]+)\s*=\s?(?P<value>.*?)\s*$")
_PVE_DEV_KEY_RE = re.compile(r"^dev(\d+)$")
_PVE_MP_KEY_RE = re.compile(r"^mp(\d+)$")
_MOUNT_PATH_RE = re.compile(r"^/[A-Za-z0-9._@+/-]*$")
PVE_MAX_MP_INDEX = 255
_ALLOW_RE = re.compile(r"^\s*c\s+(\d+):")
_SETTING_KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
# Keys that may appear several times in a config: a single-valued setting would collapse them
# into one line and drop the others (the merge owns the NVIDIA ones among the first five).
MULTI_VALUED_KEYS = frozenset(
    {
        "lxc.mount.entry",
        "lxc.cgroup.devices.allow",
        "lxc.cgroup2.devices.allow",
        "lxc.cgroup.devices.deny",
        "lxc.cgroup2.devices.deny",
        "lxc.idmap",
        "lxc.environment",
        "lxc.cap.drop",
        "lxc.cap.keep",
        "lxc.apparmor.raw",
        "lxc.mount.auto",
    }
)


class LxcGpuError(ValueError):
    """Bad input for GPU passthrough; the message names the offending value."""


@dataclass(frozen=True)
class DeviceNode:
    """A character device node as the host shows it."""

    path: str
    major: int
    minor: int

    @property
    def guest_path(self) -> str:
        """Mount target relative to the container root (``dev/nvidia0``)."""
        return self.path.lstrip("/")


# --------------------------------------------------------------------------- device selection


def parse_device_nodes(nodes: Iterable[Mapping[str, object]]) -> dict[str, DeviceNode]:
    """Validate ``[{path, major, minor}]`` (nvidia_gpu_info's ``device_nodes``) into a map by path."""
    result: dict[str, DeviceNode] = {}
    for item in nodes:
        try:
            path = str(item["path"])
            major = int(item["major"])  # type: ignore[call-overload]
            minor = int(item["minor"])  # type: ignore[call-overload]
        except (KeyError, TypeError, ValueError) as exc:
            raise LxcGpuError(f"device node entry {dict(item)!r} needs path, major and minor (integers)") from exc
        if not path.startswith("/dev/nvidia"):
            raise LxcGpuError(f"device node {path!r} is not an NVIDIA node under /dev")
        if major < 0 or minor < 0:
            raise LxcGpuError(f"device node {path!r} has a negative major/minor ({major}:{minor})")
        result[path] = DeviceNode(path, major, minor)
    return result


def resolve_gpu_selection(selection: object, available: Sequence[int]) -> list[int]:
    """Turn ``all`` or a list of GPU indexes into a sorted list, rejecting unknown indexes."""
    known = sorted(set(available))
    if isinstance(selection, str):
        if selection.strip().lower() == "all":
            if not known:
                raise LxcGpuError("gpus: all was asked for but the host has no GPUs")
            return known
        raise LxcGpuError(f"gpus must be 'all' or a list of GPU indexes, got {selection!r}")
    if not isinstance(selection, (list, tuple)):
        raise LxcGpuError(f"gpus must be 'all' or a list of GPU indexes, got {selection!r}")
    chosen: list[int] = []
    for raw in selection:
        if isinstance(raw, bool) or not (isinstance(raw, int) or (isinstance(raw, str) and raw.strip().isdigit())):
            raise LxcGpuError(f"GPU index {raw!r} is not a non-negative integer")
        index = int(raw)
        if index not in known:
            raise LxcGpuError(f"unknown GPU index {index}: the host has GPUs {known}")
        if index in chosen:
            raise LxcGpuError(f"GPU index {index} is listed twice")
        chosen.append(index)
    return sorted(chosen)


def gpu_indexes_from_nodes(host_nodes: Mapping[str, DeviceNode]) -> list[int]:
    """GPU indexes implied by ``/dev/nvidiaN`` nodes (index = minor number)."""
    return sorted(int(m.group(1)) for path in host_nodes if (m := _GPU_NODE_RE.match(path)))


def select_device_nodes(
    host_nodes: Mapping[str, DeviceNode],
    gpu_indexes: Sequence[int],
    gpu_minors: Mapping[int, int] | None = None,
    include_caps: bool = True,
    include_modeset: bool = False,
) -> list[DeviceNode]:
    """Nodes a container needs for ``gpu_indexes``: its GPUs, nvidiactl, nvidia-uvm(-tools), caps.

    ``gpu_minors`` maps nvidia-smi index -> minor number of ``/dev/nvidiaN`` where they differ
    (default: minor = index). Every required node must exist on the host; all missing ones are
    named in one error. nvidia-caps nodes and nvidia-modeset are passed when present and asked for.
    """
    minors = dict(gpu_minors or {})
    wanted = [f"/dev/nvidia{minors.get(index, index)}" for index in gpu_indexes]
    wanted += list(REQUIRED_CONTROL_NODES)
    missing = [path for path in wanted if path not in host_nodes]
    if missing:
        raise LxcGpuError(f"device node(s) missing on the host: {', '.join(missing)}")
    control = host_nodes["/dev/nvidiactl"]
    for path in wanted[: len(gpu_indexes)]:
        if host_nodes[path].major != control.major:
            raise LxcGpuError(
                f"{path} has major {host_nodes[path].major} but /dev/nvidiactl has {control.major}: "
                "not an NVIDIA GPU node"
            )
    selected = [host_nodes[path] for path in wanted]
    if include_modeset and "/dev/nvidia-modeset" in host_nodes:
        selected.append(host_nodes["/dev/nvidia-modeset"])
    if include_caps:
        selected += [host_nodes[p] for p in sorted(host_nodes) if p.startswith("/dev/nvidia-caps/")]
    return selected


# --------------------------------------------------------------------------- cgroup layout


def cgroup_layout(mounts_text: str) -> str:
    """``unified``, ``hybrid`` or ``legacy`` from ``/proc/self/mounts``."""
    v1_devices = False
    v2_root = False
    v2_any = False
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        _source, mountpoint, fstype, options = fields[:4]
        if fstype == "cgroup" and "devices" in options.split(","):
            v1_devices = True
        elif fstype == "cgroup2":
            v2_any = True
            v2_root = v2_root or mountpoint == "/sys/fs/cgroup"
    if v1_devices:
        return "hybrid" if v2_any else "legacy"
    if v2_root:
        return "unified"
    raise LxcGpuError("cannot tell the cgroup layout: no cgroup2 at /sys/fs/cgroup and no v1 devices controller")


def cgroup_devices_key(layout: str) -> str:
    """The LXC devices key: ``lxc.cgroup2.devices.allow`` only on a unified host."""
    if layout not in ("unified", "hybrid", "legacy"):
        raise LxcGpuError(f"unknown cgroup layout {layout!r} (expected unified, hybrid or legacy)")
    return CGROUP_KEYS[2] if layout == "unified" else CGROUP_KEYS[1]


# --------------------------------------------------------------------------- rendering


def render_native(
    nodes: Sequence[DeviceNode], indexes: Sequence[int], mode: str = "0666", gid: int | None = None
) -> list[Entry]:
    """PVE >= 8.1 ``devN: /dev/x[,gid=G][,mode=M]`` entries (PVE stats the node at start)."""
    if len(indexes) < len(nodes):
        raise LxcGpuError(f"{len(nodes)} device entries needed but only {len(indexes)} free devN slots")
    if not re.fullmatch(r"0?[0-7]{3}", mode):
        raise LxcGpuError(f"device mode {mode!r} is not an octal access mode like 0666")
    entries = []
    for node, index in zip(nodes, indexes, strict=False):
        options = [node.path]
        if gid is not None:
            options.append(f"gid={gid}")
        options.append(f"mode={mode}")
        entries.append((f"dev{index}", ",".join(options)))
    return entries


def render_raw(nodes: Sequence[DeviceNode], cgroup_key: str = CGROUP_KEYS[2]) -> list[Entry]:
    """Raw LXC lines: one exact cgroup rule and one bind mount per node."""
    if cgroup_key not in CGROUP_KEYS.values():
        raise LxcGpuError(f"cgroup key {cgroup_key!r} is not one of {sorted(CGROUP_KEYS.values())}")
    allows = [(cgroup_key, f"c {n.major}:{n.minor} rwm") for n in nodes]
    mounts = [("lxc.mount.entry", f"{n.path} {n.guest_path} none bind,create=file 0 0") for n in nodes]
    return allows + mounts


@dataclass(frozen=True)
class BindMount:
    """A host directory bind-mounted into the container (read-only unless said otherwise)."""

    source: str
    target: str
    read_only: bool = True


def _mount_path(value: object, what: str) -> str:
    """``value`` without trailing ``/`` if it is an absolute, normalised path below ``/`` (not ``/``
    itself) of letters, digits and ``._@+-/``; else an LxcGpuError naming ``what``."""
    path = "" if value is None else str(value)
    if not _MOUNT_PATH_RE.match(path):
        raise LxcGpuError(
            f"{what} {path!r} must be an absolute path of letters, digits and ._@+-/ (no spaces, commas or '..', not /)"
        )
    stripped = path.rstrip("/")
    why = ("it is the container's root itself" if what.endswith("target") else "it is / itself") if not stripped else ""
    if stripped:
        try:
            relative_name(stripped[1:], what)
        except PathError:
            why = "it has an empty, '.' or '..' segment, or one over 255 bytes"
    if why:
        raise LxcGpuError(
            f"{what} {path!r} is not a path below / ({why}): give a normalised absolute path such as "
            "/srv/models (not /, no '.', '..' or empty segments)"
        )
    return stripped


def parse_bind_mounts(mounts: Iterable[Mapping[str, object]]) -> list[BindMount]:
    """Checked bind mounts: absolute, normalised, plain paths below ``/`` (no spaces, commas,
    ``.``, ``..`` or empty segments; a target never the container root itself), distinct targets."""
    out: list[BindMount] = []
    for item in mounts:
        source = _mount_path(item.get("source", ""), "bind mount source")
        target = _mount_path(item.get("target", ""), "bind mount target")
        if target in {m.target for m in out}:
            raise LxcGpuError(f"bind mount target {target} given twice")
        out.append(BindMount(source, target, bool(item.get("read_only", True))))
    return out


def check_mounts_root(root: object) -> str:
    """``bind_mounts_root`` if it is empty (only the listed sources are managed) or a real
    subdirectory of the host (absolute, normalised, not ``/``); else an LxcGpuError: with ``/``
    (or what normalises to it) every bind mount of the container would be managed and removed."""
    if root in (None, ""):
        return ""
    try:
        return _mount_path(root, "bind_mounts_root")
    except LxcGpuError as exc:
        raise LxcGpuError(
            f"{exc}; bind_mounts_root must be a subdirectory of the host such as the model store "
            "(with / every bind mount of the container would count as managed and be removed)"
        ) from exc


def render_bind_mounts(mounts: Sequence[BindMount], platform: str, indexes: Sequence[int] = ()) -> list[Entry]:
    """PVE ``mpN: <src>,mp=<dst>[,ro=1]`` entries, or LXC ``lxc.mount.entry`` bind lines."""
    if platform == "proxmox":
        if len(indexes) < len(mounts):
            raise LxcGpuError(f"{len(mounts)} mount points needed but only {len(indexes)} free mpN slots")
        return [
            (f"mp{i}", f"{m.source},mp={m.target}" + (",ro=1" if m.read_only else ""))
            for m, i in zip(mounts, indexes, strict=False)
        ]
    return [
        ("lxc.mount.entry", f"{m.source} {m.target.lstrip('/')} none bind,{'ro,' if m.read_only else ''}create=dir 0 0")
        for m in mounts
    ]


def render_shm(size: str) -> Entry:
    """A ``/dev/shm`` tmpfs of ``size`` (NCCL and SGLang's tensor-parallel workers use it)."""
    if not re.fullmatch(r"\d+[kKmMgG]?|\d{1,3}%", size):
        raise LxcGpuError(f"shm size {size!r} is not like 64G, 65536M or 50%")
    return ("lxc.mount.entry", f"tmpfs dev/shm tmpfs rw,nosuid,nodev,size={size},create=dir 0 0")


# --------------------------------------------------------------------------- settings


def forbidden_char(text: str) -> str | None:
    """The first control or line/paragraph separator character in ``text`` (``U+000A``), if any.

    Covers C0/C1 controls (newline, CR, tab, form feed, NEL) and U+2028/U+2029: characters that
    split a line for some reader of the file, or hide in a value.
    """
    for char in text:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            return f"U+{ord(char):04X}"
    return None


def validate_settings(settings: Mapping[object, object]) -> list[Entry]:
    """``settings`` as ``(key, value)`` strings, or an LxcGpuError naming the bad key or value.

    Keys are config keys (letters, digits, ``.``, ``_``, ``-``): no ``[section]``, no ``:``/``=``,
    no whitespace. Keys this code manages (``devN``, the devices cgroup keys, ``lxc.mount.entry``)
    and keys that may appear more than once are refused: setting them would delete lines. Values
    are strings or numbers (booleans become ``1``/``0``, as PVE and LXC write them) without
    control characters or separators and without leading or trailing whitespace (the readers
    drop it, so the value would never read back as written).
    """
    entries: list[Entry] = []
    for raw_key, raw_value in settings.items():
        key = str(raw_key)
        if not _SETTING_KEY_RE.fullmatch(key):
            raise LxcGpuError(
                f"settings key {key!r} is not a config key (letters, digits, '.', '_', '-'; "
                "no section, separator or control character)"
            )
        managed = _PVE_DEV_KEY_RE.match(key) or _PVE_MP_KEY_RE.match(key)
        if managed or key in MULTI_VALUED_KEYS or key.startswith("lxc.hook."):
            raise LxcGpuError(
                f"settings key {key!r} cannot be set: it is managed by this module or may appear more "
                "than once (pass GPUs with gpus, /dev/shm with shm_size; edit other multi-valued keys yourself)"
            )
        if isinstance(raw_value, bool):
            value = "1" if raw_value else "0"
        elif isinstance(raw_value, (str, int, float)):
            value = str(raw_value)
        else:
            raise LxcGpuError(f"settings value of {key!r} must be a string or a number, got {raw_value!r}")
        bad = forbidden_char(value)
        if bad:
            raise LxcGpuError(
                f"settings value of {key!r} contains the control character {bad}: it would split or "
                "corrupt the config line"
            )
        if value != value.strip():
            raise LxcGpuError(f"settings value of {key!r} has leading or trailing whitespace: {value!r}")
        entries.append((key, value))
    return entries


# --------------------------------------------------------------------------- config merge


def _owned_source(source: str, sources: frozenset[str], root: str) -> bool:
    return source in sources or (bool(root) and (source == root or source.startswith(root.rstrip("/") + "/")))


def owned_predicate(
    owned_majors: Iterable[int], mount_sources: Iterable[str] = (), mount_root: str = ""
) -> Callable[[str, str], bool]:
    """Which multi-valued entries this code owns: NVIDIA devN/cgroup/mount lines, the shm mount, and
    bind mounts (``mpN`` / ``lxc.mount.entry``) of the given sources or of sources under ``mount_root``."""
    majors = set(owned_majors)
    sources = frozenset(mount_sources)

    def owned(key: str, value: str) -> bool:
        if _PVE_MP_KEY_RE.match(key):
            return _owned_source(value.split(",", 1)[0], sources, mount_root)
        if _PVE_DEV_KEY_RE.match(key):
            path = value.split(",", 1)[0].removeprefix("path=")
            return path.startswith("/dev/nvidia")
        if key in CGROUP_KEYS.values():
            match = _ALLOW_RE.match(value)
            return bool(match) and int(match.group(1)) in majors
        if key == "lxc.mount.entry":
            fields = value.split()
            return bool(fields) and (
                fields[0].startswith("/dev/nvidia")
                or (len(fields) > 1 and fields[1].strip("/") == "dev/shm")
                or _owned_source(fields[0], sources, mount_root)
            )
        return False

    return owned


def split_lines(text: str) -> tuple[list[str], bool, str]:
    """Lines of ``text`` split on ``\\n`` only (each keeps a trailing ``\\r``), whether it ends
    with a newline, and the line ending new lines get (``\\r\\n`` when most lines use it)."""
    if not text:
        return [], True, "\n"
    lines = text.split("\n")
    final_newline = lines[-1] == ""
    if final_newline:
        lines.pop()
    crlf = sum(1 for line in lines if line.endswith("\r"))
    return lines, final_newline, "\r\n" if lines and crlf * 2 > len(lines) else "\n"


def join_lines(lines: Sequence[str], final_newline: bool) -> str:
    """Inverse of split_lines."""
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if final_newline else "")


def _parse_line(line: str, platform: str) -> Entry | None:
    line = line.removesuffix("\r")
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    match = (_PVE_LINE_RE if platform == "proxmox" else _LXC_LINE_RE).match(line)
    return (match.group("key"), match.group("value")) if match else None


def _format(entry: Entry, platform: str, eol: str = "\n") -> str:
    line = f"{entry[0]}: {entry[1]}" if platform == "proxmox" else f"{entry[0]} = {entry[1]}"
    return line + ("\r" if eol == "\r\n" else "")


def _split_main(lines: list[str], platform: str) -> tuple[list[str], list[str]]:
    """PVE confs have ``[snapshot]``/``[pve:pending]`` sections after the main one; edit only the main."""
    if platform == "proxmox":
        for i, line in enumerate(lines):
            if line.startswith("["):
                return lines[:i], lines[i:]
    return lines, []


def used_dev_indexes(
    text: str, owned: Callable[[str, str], bool], key_re: re.Pattern[str] = _PVE_DEV_KEY_RE
) -> set[int]:
    """``devN`` (or, with ``key_re``, ``mpN``) indexes taken by entries this code does not own."""
    main, _sections = _split_main(split_lines(text)[0], "proxmox")
    used = set()
    for line in main:
        entry = _parse_line(line, "proxmox")
        if entry and (m := key_re.match(entry[0])) and not owned(*entry):
            used.add(int(m.group(1)))
    return used


def free_dev_indexes(used: set[int], count: int) -> list[int]:
    """The ``count`` lowest ``devN`` indexes not in ``used``."""
    free = [i for i in range(PVE_MAX_DEV_INDEX + 1) if i not in used][:count]
    if len(free) < count:
        raise LxcGpuError(f"{count} devN entries needed but only {len(free)} of dev0..dev255 are free")
    return free


def _pve_sort_key(key: str) -> tuple[int, str]:
    # PVE writes its own keys sorted, then the raw lxc.* keys last.
    return (1 if key.startswith("lxc.") else 0, key)


class _Slot:
    """A place in the config that receives managed entries (filled once everything is placed)."""

    def __init__(self, group: str, entries: Sequence[Entry] = ()) -> None:
        self.group = group
        self.entries = list(entries)


def _group(platform: str, key: str) -> str:
    """Where a managed key goes: ``raw`` (lxc.* keys, and every key of plain LXC) or ``plain``."""
    return "raw" if platform == "lxc" or key.startswith("lxc.") else "plain"


def _check_merge_input(platform: str, block: Sequence[Entry], settings: Sequence[Entry]) -> dict[str, str]:
    """The settings as a dict, after refusing an unknown platform, a setting twice, a setting in the block."""
    if platform not in PLATFORMS:
        raise LxcGpuError(f"unknown platform {platform!r} (expected one of {', '.join(PLATFORMS)})")
    single: dict[str, str] = {}
    for key, value in settings:
        if key in single:
            raise LxcGpuError(f"setting {key!r} given twice")
        single[key] = value
    clash = {k for k, _value in block} & set(single)
    if clash:
        raise LxcGpuError(f"key(s) {sorted(clash)} cannot be both a setting and a device entry")
    return single


def _keep_unmanaged(
    main: Sequence[str], platform: str, single: dict[str, str], owned: Callable[[str, str], bool]
) -> tuple[list[str | _Slot], dict[str, _Slot], set[str]]:
    """The lines kept as they are, settings updated in place (first one only), and a slot where the
    first owned line of each group was; returns (kept, slots by group, settings seen)."""
    kept: list[str | _Slot] = []
    slots: dict[str, _Slot] = {}
    seen: set[str] = set()
    for line in main:
        entry = _parse_line(line, platform)
        if entry is None:
            kept.append(line)
        elif entry[0] in single:
            if entry[0] not in seen:
                seen.add(entry[0])
                cr = "\r" if line.endswith("\r") else ""
                kept.append(_format((entry[0], single[entry[0]]), platform) + cr)
        elif owned(*entry):
            group = _group(platform, entry[0])
            if group not in slots:
                slots[group] = _Slot(group)
                kept.append(slots[group])
        else:
            kept.append(line)
    return kept, slots, seen


def _place_new(
    kept: list[str | _Slot], slots: dict[str, _Slot], new: list[Entry], block: Sequence[Entry], platform: str
) -> None:
    """Fill the slots with the block, and put new settings and a block without a slot where PVE would."""
    plain_block = sorted((e for e in block if _group(platform, e[0]) == "plain"), key=lambda e: e[0])
    raw_block = [e for e in block if _group(platform, e[0]) == "raw"]
    new_plain: list[list[Entry]] = [[e] for e in new if _group(platform, e[0]) == "plain"]
    if "plain" in slots:
        slots["plain"].entries = plain_block
    elif plain_block:
        new_plain.append(plain_block)
    for entries in new_plain:
        kept.insert(_sorted_position(kept, entries[0][0], platform), _Slot("plain", entries))
    if "raw" in slots:
        slots["raw"].entries = raw_block
        appended = []
    else:
        appended = raw_block
    appended += [e for e in new if _group(platform, e[0]) == "raw"]
    tail = len(kept)
    while tail > 0 and isinstance(kept[tail - 1], str) and not str(kept[tail - 1]).strip():
        tail -= 1
    kept.insert(tail, _Slot("raw", appended))


def merge_config(
    text: str,
    platform: str,
    block: Sequence[Entry],
    settings: Sequence[Entry],
    owned: Callable[[str, str], bool],
) -> str:
    """Merge managed entries into a config, keeping every unrelated line as it was.

    ``settings`` are single-valued keys (``cores``, ``lxc.prlimit.memlock``): updated in place,
    duplicates dropped, added when absent. ``block`` holds the multi-valued managed entries: every
    owned line is removed and the block goes where the first owned line of its group was. New
    entries go where PVE's writer would put them: its own keys sorted, raw ``lxc.*`` keys last
    (plain LXC: at the end). Merging the result again gives the same text.
    """
    single = _check_merge_input(platform, block, settings)
    lines, final_newline, eol = split_lines(text)
    main, rest = _split_main(lines, platform)
    kept, slots, seen = _keep_unmanaged(main, platform, single, owned)
    _place_new(kept, slots, [(k, v) for k, v in settings if k not in seen], block, platform)
    out: list[str] = []
    for item in kept:
        if isinstance(item, _Slot):
            out += [_format(e, platform, eol) for e in item.entries]
        else:
            out.append(item)
    out += rest
    return join_lines(out, final_newline)


def _sorted_position(kept: Sequence[str | _Slot], key: str, platform: str) -> int:
    """Where PVE's sorted writer would put ``key``: before the first entry that sorts after it."""
    want = _pve_sort_key(key)
    position = 0
    entry_seen = False
    for i, item in enumerate(kept):
        if isinstance(item, _Slot):
            if item.entries and _pve_sort_key(item.entries[0][0]) > want:
                return i
            position = i + 1 if item.entries else position
            continue
        entry = _parse_line(item, platform)
        if entry is None:
            # Leading comment lines are PVE's description: new entries go after them.
            if not entry_seen and item.lstrip().startswith("#"):
                position = i + 1
            continue
        entry_seen = True
        if _pve_sort_key(entry[0]) > want:
            return i
        position = i + 1
    return position


# --------------------------------------------------------------------------- one call for the module


def plan_config(
    text: str,
    *,
    platform: str,
    nodes: Sequence[DeviceNode],
    passthrough: str = "native",
    cgroup_key: str = CGROUP_KEYS[2],
    settings: Mapping[object, object] | None = None,
    shm_size: str = "",
    dev_mode: str = "0666",
    dev_gid: int | None = None,
    owned_majors: Iterable[int] = (),
    bind_mounts: Sequence[BindMount] = (),
    bind_mounts_root: str = "",
) -> tuple[str, list[Entry]]:
    """The new config text and the device entries it holds, for ``nodes`` passed into one container."""
    if platform not in PLATFORMS:
        raise LxcGpuError(f"unknown platform {platform!r} (expected one of {', '.join(PLATFORMS)})")
    if passthrough not in PASSTHROUGH:
        raise LxcGpuError(f"unknown passthrough {passthrough!r} (expected one of {', '.join(PASSTHROUGH)})")
    majors = set(owned_majors) | {n.major for n in nodes}
    owned = owned_predicate(majors, [m.source for m in bind_mounts], check_mounts_root(bind_mounts_root))
    if platform == "proxmox" and passthrough == "native":
        free = free_dev_indexes(used_dev_indexes(text, owned), len(nodes))
        block = render_native(nodes, free, mode=dev_mode, gid=dev_gid)
    else:
        block = render_raw(nodes, cgroup_key)
    if shm_size:
        block.append(render_shm(shm_size))
    if bind_mounts:
        free_mp = (
            [i for i in range(PVE_MAX_MP_INDEX + 1) if i not in used_dev_indexes(text, owned, _PVE_MP_KEY_RE)]
            if platform == "proxmox"
            else []
        )
        block += render_bind_mounts(bind_mounts, platform, free_mp)
    return merge_config(text, platform, block, validate_settings(settings or {}), owned), block
