# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure parsers for what the NVIDIA driver exposes (stdlib only).

Formats follow real captures (tests/unit/fixtures/nvidia/h200-580/):

- ``/proc/driver/nvidia/version`` (kernel module version and type: open or proprietary)
- ``/proc/devices`` (character device majors: nvidia, nvidia-uvm, nvidia-caps, ...)
- ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` (also the ``-lms`` loop)
- ``nvidia-smi -q`` / plain ``nvidia-smi`` / ``nvidia-smi --version`` (driver and CUDA version)
- ``nvidia-smi topo -m`` (P2P matrix with CPU/NUMA affinity columns)
- ``nvidia-smi -L`` (GPU list)

Each parser raises :class:`NvidiaParseError` naming what it could not parse, with a snippet.
"""

from __future__ import annotations

import datetime
import os
import re
import stat

# Fields the nvidia_gpu_info module queries, in this order.
GPU_INFO_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "compute_cap",
    "memory.total",
    "power.limit",
    "power.max_limit",
    "persistence_mode",
    "pcie.link.gen.max",
    "pcie.link.width.max",
)

# Fields of the telemetry loop (docs/measurement.md) used by the throughput gate.
TELEMETRY_FIELDS: tuple[str, ...] = (
    "timestamp",
    "index",
    "power.draw.instant",
    "utilization.gpu",
    "clocks.sm",
    "clocks_event_reasons.active",
    "temperature.gpu",
    "enforced.power.limit",
)
# Not a query field: nvidia-smi 580 rejects ``total_energy_consumption`` (exit 2, see the H200 fixture
# query-invalid-field.txt). Exact energy comes from NVML's nvmlDeviceGetTotalEnergyConsumption (mJ).

# How each query field's value is typed. Fields not listed stay strings.
_INT_FIELDS = frozenset(
    {
        "index",
        "count",
        "memory.total",
        "memory.used",
        "memory.free",
        "memory.reserved",
        "pcie.link.gen.max",
        "pcie.link.gen.current",
        "pcie.link.gen.gpucurrent",
        "pcie.link.gen.gpumax",
        "pcie.link.gen.hostmax",
        "pcie.link.width.max",
        "pcie.link.width.current",
        "utilization.gpu",
        "utilization.memory",
        "clocks.sm",
        "clocks.current.sm",
        "clocks.mem",
        "clocks.current.memory",
        "clocks.gr",
        "clocks.current.graphics",
        "clocks.max.sm",
        "clocks.max.memory",
        "clocks.max.graphics",
        "temperature.gpu",
        "temperature.memory",
        "fan.speed",
        "total_energy_consumption",
    }
)
_FLOAT_FIELDS = frozenset(
    {
        "power.draw",
        "power.draw.average",
        "power.draw.instant",
        "power.limit",
        "power.max_limit",
        "power.min_limit",
        "power.default_limit",
        "enforced.power.limit",
    }
)
_HEX_FIELDS = frozenset({"clocks_event_reasons.active", "clocks_throttle_reasons.active"})
_BOOL_FIELDS = frozenset({"persistence_mode"})

# Values nvidia-smi prints when a field has no value on this GPU/driver.
_ABSENT_VALUES = frozenset(
    {
        "[N/A]",
        "N/A",
        "[Not Supported]",
        "Not Supported",
        "[Unknown Error]",
        "[Insufficient Permissions]",
        "[GPU requires reset]",
        "[GPU is lost]",
    }
)
# A number followed by the unit nvidia-smi appends when ``nounits`` is not given.
_UNIT_RE = re.compile(r"^(?P<num>-?\d+(?:\.\d+)?) (?:MiB|KiB|GiB|W|%|MHz|mJ|J|C|RPM)$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_SNIPPET_LEN = 160


class NvidiaParseError(ValueError):
    """Output of an NVIDIA tool or proc file could not be parsed.

    ``source`` names what was parsed (a command line or a path), ``snippet`` the offending text.
    """

    def __init__(self, source: str, problem: str, snippet: str = "") -> None:
        self.source = source
        self.problem = problem
        self.snippet = snippet[:_SNIPPET_LEN]
        message = f"cannot parse {source}: {problem}"
        if snippet:
            message += f": {self.snippet!r}"
        super().__init__(message)


def _first_lines(text: str, count: int = 3) -> str:
    return "\n".join(text.strip().splitlines()[:count]) if text.strip() else "(empty output)"


# --------------------------------------------------------------------------- query CSV


def split_csv_line(line: str) -> list[str]:
    """Split one line of ``--format=csv`` output into stripped cells.

    nvidia-smi separates cells with ``", "`` and never quotes; GPU names, UUIDs, bus ids and
    timestamps contain no commas.
    """
    return [cell.strip() for cell in line.split(",")]


def _strip_unit(value: str) -> str:
    match = _UNIT_RE.match(value)
    return match.group("num") if match else value


_HEADER_CELL_RE = re.compile(r"^[a-z][a-z0-9_.]*(?: \[[^\]]+\])?$")


def _is_header(cells: list[str]) -> bool:
    """True for the header line of ``--format=csv`` (field names, optionally ``[unit]``)."""
    return all(_HEADER_CELL_RE.match(cell) for cell in cells)


def parse_query_csv(
    text: str, fields: list[str] | tuple[str, ...], source: str = "nvidia-smi --query-gpu"
) -> list[dict]:
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`` output.

    Returns one dict per line, keyed by the requested field names, with values as stripped strings
    (units removed if present) or ``None`` where nvidia-smi printed ``[N/A]``/``[Not Supported]``.
    A header line (``--format=csv`` without ``noheader``) is recognised and skipped. Blank lines are
    ignored. A line with the wrong number of cells raises :class:`NvidiaParseError`.
    """
    fields = list(fields)
    if not fields:
        raise NvidiaParseError(source, "no fields were requested")
    rows: list[dict] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = split_csv_line(line)
        if len(cells) != len(fields):
            raise NvidiaParseError(
                source, f"expected {len(fields)} comma-separated values ({', '.join(fields)}), got {len(cells)}", line
            )
        if not rows and _is_header(cells):
            continue
        row: dict = {}
        for field, cell in zip(fields, cells, strict=True):
            row[field] = None if cell in _ABSENT_VALUES else _strip_unit(cell)
        rows.append(row)
    return rows


def _convert(field: str, value: str | None, source: str, line: str) -> object:
    if value is None:
        return None
    try:
        if field in _INT_FIELDS:
            return int(value)
        if field in _FLOAT_FIELDS:
            return float(value)
        if field in _HEX_FIELDS:
            return int(value, 16)
    except ValueError:
        raise NvidiaParseError(source, f"field {field} is not a number: {value!r}", line) from None
    if field in _BOOL_FIELDS:
        if value not in ("Enabled", "Disabled"):
            raise NvidiaParseError(source, f"field {field} is neither Enabled nor Disabled: {value!r}", line)
        return value == "Enabled"
    return value


def parse_query_typed(
    text: str, fields: list[str] | tuple[str, ...], source: str = "nvidia-smi --query-gpu"
) -> list[dict]:
    """Like :func:`parse_query_csv`, with numbers, hex masks and Enabled/Disabled converted.

    Integers: indices, MiB, MHz, %, degrees C, PCIe gen/width, mJ. Floats: watts. Hex masks
    (``clocks_event_reasons.active``) become ints. ``persistence_mode`` becomes a bool.
    """
    rows = parse_query_csv(text, fields, source)
    lines = [line for line in text.splitlines() if line.strip() and not _is_header(split_csv_line(line))]
    return [
        {field: _convert(field, value, source, line) for field, value in row.items()}
        for row, line in zip(rows, lines, strict=True)
    ]


def gpu_records(rows: list[dict]) -> list[dict]:
    """Map typed rows of :data:`GPU_INFO_FIELDS` to the records nvidia_gpu_info returns."""
    return [
        {
            "index": row["index"],
            "name": row["name"],
            "uuid": row["uuid"],
            "pci_bus_id": row["pci.bus_id"],
            "compute_cap": row["compute_cap"],
            "memory_total_mib": row["memory.total"],
            "power_limit_w": row["power.limit"],
            "power_max_limit_w": row["power.max_limit"],
            "persistence_mode": row["persistence_mode"],
            "pcie_gen_max": row["pcie.link.gen.max"],
            "pcie_width_max": row["pcie.link.width.max"],
        }
        for row in rows
    ]


def parse_gpu_query(text: str, source: str = "nvidia-smi --query-gpu") -> list[dict]:
    """Parse the nvidia_gpu_info query (:data:`GPU_INFO_FIELDS`, csv,noheader,nounits) into GPU records."""
    rows = parse_query_typed(text, GPU_INFO_FIELDS, source)
    for row in rows:
        for required in ("index", "name", "uuid", "pci.bus_id", "compute_cap"):
            if row[required] is None:
                raise NvidiaParseError(source, f"GPU has no {required}", str(row))
        if not re.match(r"^\d+\.\d+$", row["compute_cap"]):
            raise NvidiaParseError(source, f"compute_cap is not MAJOR.MINOR: {row['compute_cap']!r}", str(row))
    return gpu_records(rows)


# --------------------------------------------------------------------------- telemetry (-lms)

_TIMESTAMP_FORMAT = "%Y/%m/%d %H:%M:%S.%f"


def parse_smi_timestamp(value: str) -> datetime.datetime:
    """Parse an nvidia-smi ``timestamp`` field (``2026/11/29 23:39:35.635``, local time, naive)."""
    try:
        return datetime.datetime.strptime(value, _TIMESTAMP_FORMAT)
    except ValueError:
        raise NvidiaParseError("nvidia-smi timestamp", "not YYYY/MM/DD HH:MM:SS.mmm", value) from None


def parse_telemetry(
    text: str,
    fields: list[str] | tuple[str, ...] = TELEMETRY_FIELDS,
    source: str = "nvidia-smi --query-gpu -lms",
    drop_partial_last: bool = True,
) -> list[dict]:
    """Parse the samples of an ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits -lms N`` loop.

    A loop killed mid-write can leave a cut last line; with ``drop_partial_last`` (the default) a
    last line that lacks its newline and does not parse is dropped. A ``timestamp`` field gains
    ``timestamp_s`` (seconds since the epoch, local time as printed).
    """
    if drop_partial_last and text and not text.endswith("\n"):
        head, _sep, last = text.rpartition("\n")
        try:
            parse_query_typed(last, fields, source)
        except NvidiaParseError:
            text = head
    rows = parse_query_typed(text, fields, source)
    if "timestamp" in fields:
        for row in rows:
            stamp = row["timestamp"]
            row["timestamp_s"] = None if stamp is None else parse_smi_timestamp(stamp).timestamp()
    return rows


# --------------------------------------------------------------------------- /proc files

_PROC_VERSION_RE = re.compile(
    r"^NVRM version:\s+NVIDIA UNIX\s+(?:(?P<open>Open Kernel Module for \S+)|(?P<arch>\S+) Kernel Module)"
    r"\s+(?P<version>\d+\.\d+(?:\.\d+)?)\s"
)


def parse_proc_version(text: str, source: str = "/proc/driver/nvidia/version") -> dict:
    """Parse ``/proc/driver/nvidia/version``: ``{"version": "580.159.04", "type": "open"|"proprietary"}``.

    The open kernel modules say ``NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build``;
    the proprietary ones ``NVIDIA UNIX x86_64 Kernel Module  570.133.20  <build date>``.
    """
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            match = _PROC_VERSION_RE.match(line + " ")
            if not match:
                raise NvidiaParseError(source, "unrecognised NVRM version line", line)
            return {"version": match.group("version"), "type": "open" if match.group("open") else "proprietary"}
    raise NvidiaParseError(source, "no 'NVRM version:' line", _first_lines(text))


def parse_proc_devices(text: str, source: str = "/proc/devices") -> list[tuple[int, str]]:
    """Parse the ``Character devices:`` section of ``/proc/devices`` into ``(major, name)`` pairs.

    A name can appear under several majors and a major under several names; order is kept.
    """
    entries: list[tuple[int, str]] = []
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.endswith(":") and stripped[:-1] in ("Character devices", "Block devices"):
            section = stripped[:-1]
            continue
        if section is None:
            raise NvidiaParseError(source, "text before the 'Character devices:' heading", line)
        parts = stripped.split(None, 1)
        if len(parts) != 2 or not parts[0].isdigit():
            raise NvidiaParseError(source, "expected '<major> <name>'", line)
        if section == "Character devices":
            entries.append((int(parts[0]), parts[1]))
    if section is None:
        raise NvidiaParseError(source, "no 'Character devices:' section", _first_lines(text))
    return entries


def nvidia_device_majors(entries: list[tuple[int, str]]) -> dict[str, int]:
    """The NVIDIA entries (``nvidia``, ``nvidiactl``, ``nvidia-uvm``, ``nvidia-caps``, ...) as name -> major."""
    majors: dict[str, int] = {}
    for major, name in entries:
        if name.startswith("nvidia") and name not in majors:
            majors[name] = major
    return majors


# --------------------------------------------------------------------------- versions

_DRIVER_RE = re.compile(r"Driver Version\s*:\s*(?P<v>\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
_CUDA_RE = re.compile(r"CUDA Version\s*:\s*(?P<v>\d+\.\d+)", re.IGNORECASE)


def parse_smi_versions(text: str, source: str = "nvidia-smi") -> dict:
    """Driver and CUDA version from ``nvidia-smi -q`` (header), plain ``nvidia-smi`` or ``nvidia-smi --version``.

    Returns ``{"driver_version": "580.159.04", "cuda_version": "13.0"}``; raises if either is absent.
    """
    driver = _DRIVER_RE.search(text)
    cuda = _CUDA_RE.search(text)
    if not driver or not cuda:
        missing = " and ".join(name for name, m in (("Driver Version", driver), ("CUDA Version", cuda)) if not m)
        raise NvidiaParseError(source, f"no {missing}", _first_lines(text))
    return {"driver_version": driver.group("v"), "cuda_version": cuda.group("v")}


# --------------------------------------------------------------------------- -L

_LIST_RE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+) \(UUID: (?P<uuid>GPU-[0-9a-fA-F-]+)\)$")


def parse_gpu_list(text: str, source: str = "nvidia-smi -L") -> list[dict]:
    """Parse ``nvidia-smi -L``: ``[{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-..."}]`` (MIG lines skipped)."""
    gpus = []
    for line in text.splitlines():
        if not line.strip() or line.startswith((" ", "\t")):
            continue
        match = _LIST_RE.match(line.rstrip())
        if not match:
            raise NvidiaParseError(source, "expected 'GPU <n>: <name> (UUID: GPU-...)'", line)
        gpus.append({"index": int(match.group("index")), "name": match.group("name"), "uuid": match.group("uuid")})
    return gpus


# --------------------------------------------------------------------------- topo -m

_DEVICE_RE = re.compile(r"^(GPU|NIC)\d+$")
_LINK_RE = re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|NV\d+|SOC|CNV)$")
_AFFINITY_KEYS = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}


def _topo_header(lines: list[str], text: str, source: str) -> tuple[int, list[str], list[str]]:
    """(index of the header line, the device columns, the affinity columns after them)."""
    header_index = next((i for i, line in enumerate(lines) if line.strip().startswith("GPU0")), None)
    if header_index is None:
        raise NvidiaParseError(source, "no header line naming GPU0", _first_lines(text))
    header = [cell.strip() for cell in lines[header_index].split("\t")]
    if header and header[0] == "":
        header = header[1:]
    devices = [cell for cell in header if _DEVICE_RE.match(cell)]
    if header[: len(devices)] != devices:
        raise NvidiaParseError(source, "device columns are not first in the header", lines[header_index])
    extra = header[len(devices) :]
    unknown = [cell for cell in extra if cell not in _AFFINITY_KEYS]
    if unknown:
        raise NvidiaParseError(source, f"unknown header column(s) {unknown}", lines[header_index])
    return header_index, devices, extra


def _topo_row(
    line: str, devices: list[str], extra: list[str], source: str
) -> tuple[str, dict[str, str], dict[str, str | None] | None]:
    """(device, its links to the other devices, its affinity columns or None without any)."""
    cells = [cell.strip() for cell in line.split("\t")]
    name = cells[0]
    if name not in devices:
        raise NvidiaParseError(source, f"row {name!r} is not a device of the header ({', '.join(devices)})", line)
    links = cells[1 : 1 + len(devices)]
    if len(links) != len(devices) or any(not _LINK_RE.match(link) for link in links):
        raise NvidiaParseError(source, f"row {name} does not hold {len(devices)} link types", line)
    if links[devices.index(name)] != "X":
        raise NvidiaParseError(source, f"row {name} has no 'X' on the diagonal", line)
    peers = {peer: link for peer, link in zip(devices, links, strict=True) if peer != name}
    if not extra:
        return name, peers, None
    rest = cells[1 + len(devices) :]
    # nvidia-smi pads "NUMA Affinity" with an extra tab: drop empty cells when that aligns.
    values = rest if len(rest) == len(extra) else [cell for cell in rest if cell]
    if len(values) != len(extra):
        raise NvidiaParseError(source, f"row {name} does not hold the columns {extra}", line)
    row_affinity = {
        _AFFINITY_KEYS[key]: (None if value in ("N/A", "") else value) for key, value in zip(extra, values, strict=True)
    }
    return name, peers, row_affinity


def parse_topo_matrix(text: str, source: str = "nvidia-smi topo -m") -> dict:
    """Parse ``nvidia-smi topo -m``.

    Returns ``{"gpus": ["GPU0", ...], "nics": [...], "matrix": {"GPU0": {"GPU1": "NODE", ...}},
    "affinity": {"GPU0": {"cpu_affinity": "0-15", "numa_affinity": "0", "gpu_numa_id": "N/A"}}}``.
    The self cell (``X``) is left out of the matrix. ANSI underline codes and the legend are ignored.
    """
    lines = [_ANSI_RE.sub("", line) for line in text.splitlines()]
    header_index, devices, extra = _topo_header(lines, text, source)
    matrix: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str | None]] = {}
    for line in lines[header_index + 1 :]:
        if not line.strip() or line.startswith(("Legend:", "NIC Legend:")):
            break
        name, links, row_affinity = _topo_row(line, devices, extra, source)
        matrix[name] = links
        if row_affinity is not None:
            affinity[name] = row_affinity
    missing = [device for device in devices if device not in matrix]
    if missing:
        raise NvidiaParseError(source, f"no row for {', '.join(missing)}", _first_lines(text, 4))
    return {
        "gpus": [d for d in devices if d.startswith("GPU")],
        "nics": [d for d in devices if d.startswith("NIC")],
        "matrix": matrix,
        "affinity": {k: v for k, v in affinity.items() if k.startswith("GPU")},
    }


# --------------------------------------------------------------------------- failures

DRIVER_NOT_LOADED_MARKER = "couldn't communicate with the NVIDIA driver"
VERSION_MISMATCH_MARKER = "Driver/library version mismatch"


def classify_smi_failure(rc: int, output: str) -> str:
    """Name why nvidia-smi failed: ``driver_not_loaded``, ``version_mismatch``, ``no_devices`` or ``other``."""
    if rc == 9 or DRIVER_NOT_LOADED_MARKER in output:
        return "driver_not_loaded"
    if VERSION_MISMATCH_MARKER in output:
        return "version_mismatch"
    if rc == 6 or "No devices were found" in output:
        return "no_devices"
    return "other"


# --------------------------------------------------------------------------- device nodes


def describe_device_nodes(entries: list[tuple[str, int, int]]) -> list[dict]:
    """Character device nodes from ``(path, st_mode, st_rdev)`` triples, as ``{path, major, minor}`` sorted by path.

    Entries that are not character devices (directories, regular files, links' targets that are not
    devices) are left out.
    """
    nodes = [
        {"path": path, "major": os.major(rdev), "minor": os.minor(rdev)}
        for path, mode, rdev in entries
        if stat.S_ISCHR(mode)
    ]
    return sorted(nodes, key=lambda node: node["path"])


def scan_device_nodes(dev_dir: str, name_as: str | None = None) -> list[dict]:
    """The NVIDIA character devices under dev_dir (``nvidia*`` and ``nvidia-caps/*``) as
    ``{path, major, minor}``. With ``name_as`` (e.g. ``/dev``) paths are named as under that
    directory instead of dev_dir, for callers that read a copy of /dev elsewhere.
    """
    paths = [os.path.join(dev_dir, name) for name in os.listdir(dev_dir) if name.startswith("nvidia")]
    caps = os.path.join(dev_dir, "nvidia-caps")
    if os.path.isdir(caps):
        paths.extend(os.path.join(caps, name) for name in os.listdir(caps))
    entries = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        shown = path if name_as is None else os.path.join(name_as, os.path.relpath(path, dev_dir))
        entries.append((shown, st.st_mode, st.st_rdev))
    return describe_device_nodes(entries)
