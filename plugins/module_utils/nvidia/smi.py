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
- ``nvidia-smi -q -x`` (the XML report: ECC, row remapping, retired pages, PCIe link, clock event
  reasons, power, persistence; DTD and entity declarations refused)
- ``NVRM: Xid`` lines of the kernel log (``journalctl -k``, ``dmesg``, ``/dev/kmsg`` records)

Each parser raises :class:`NvidiaParseError` naming what it could not parse, with a snippet.
"""

from __future__ import annotations

import os
import re
import stat
import xml.etree.ElementTree as ET  # nosec B405 - DTDs and entities are refused before parsing (parse_smi_xml)

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


# --------------------------------------------------------------------------- -q -x (XML)

# nvidia-smi 580 writes ``<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">`` (see the H200 capture):
# that exact external reference (never fetched) is dropped; any other DOCTYPE, an internal subset or an
# entity declaration is refused, so entity expansion ("billion laughs") and external entities cannot happen.
_SMI_DOCTYPE_RE = re.compile(r'<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v\d{1,3}\.dtd">')
_XML_MAX_CHARS = 16 * 1024 * 1024
_XML_NUMBER_RE = re.compile(r"^(?P<num>-?\d+(?:\.\d+)?)(?: ?(?P<unit>[A-Za-z%/()]+))?$")
_XML_FLAGS = {"Yes": True, "No": False, "Enabled": True, "Disabled": False, "Active": True, "Not Active": False}
# The clock event reasons, in the order nvidia-smi 580 prints them; older drivers say "throttle" for "event".
CLOCK_EVENT_REASONS: tuple[str, ...] = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "display_clocks_setting",
)


def load_smi_xml(text: str, source: str = "nvidia-smi -q -x") -> ET.Element:
    """The root element (``nvidia_smi_log``) of ``nvidia-smi -q -x`` output, parsed safely.

    Raises :class:`NvidiaParseError` for text that is too long, declares entities, carries a DOCTYPE
    other than nvidia-smi's own external one, is not well-formed XML, or has another root element.
    """
    if len(text) > _XML_MAX_CHARS:
        raise NvidiaParseError(source, f"output is longer than {_XML_MAX_CHARS} characters")
    if "<!entity" in text.lower():
        raise NvidiaParseError(source, "entity declarations are refused", text[text.lower().index("<!entity") :])
    body = _SMI_DOCTYPE_RE.sub("", text, count=1)
    if "<!doctype" in body.lower():
        at = body.lower().index("<!doctype")
        raise NvidiaParseError(
            source, 'a DOCTYPE other than nvidia-smi\'s own (SYSTEM "nvsmi_device_vN.dtd") is refused', body[at:]
        )
    try:
        root = ET.fromstring(body)  # nosec B314 - no DOCTYPE or entity can reach the parser (checked above)
    except ET.ParseError as exc:
        raise NvidiaParseError(source, f"not well-formed XML ({exc})", _first_lines(body)) from None
    if root.tag != "nvidia_smi_log":
        raise NvidiaParseError(source, f"root element is <{root.tag}>, not <nvidia_smi_log>")
    return root


def _xml_text(gpu: ET.Element, path: str) -> str | None:
    """Stripped text of the element at ``path`` under ``gpu``; None when absent or an absent value (N/A)."""
    node = gpu.find(path)
    if node is None or node.text is None:
        return None
    value = node.text.strip()
    return None if value in _ABSENT_VALUES or value == "" else value


def _xml_number(gpu: ET.Element, path: str, source: str, unit: str | None = None) -> float | None:
    """The number at ``path`` (``700.00 W``, ``16x``, ``3072 bank(s)``, ``0 us``, ``34 C``); None when absent."""
    value = _xml_text(gpu, path)
    if value is None:
        return None
    match = _XML_NUMBER_RE.match(value)
    if not match or (unit is not None and match.group("unit") != unit):
        want = f"a number in {unit}" if unit else "a number"
        raise NvidiaParseError(source, f"<{path}> is not {want}", value)
    return float(match.group("num"))


def _xml_int(gpu: ET.Element, path: str, source: str, unit: str | None = None) -> int | None:
    number = _xml_number(gpu, path, source, unit)
    if number is None:
        return None
    if number != int(number):
        raise NvidiaParseError(source, f"<{path}> is not a whole number: {number}", str(number))
    return int(number)


def _xml_flag(gpu: ET.Element, path: str, source: str) -> bool | None:
    """Yes/No, Enabled/Disabled, Active/Not Active as a bool; None when absent."""
    value = _xml_text(gpu, path)
    if value is None:
        return None
    if value not in _XML_FLAGS:
        raise NvidiaParseError(source, f"<{path}> is not one of {', '.join(_XML_FLAGS)}", value)
    return _XML_FLAGS[value]


def _xml_counts(gpu: ET.Element, path: str, source: str) -> dict[str, int | None]:
    """Every child of ``path`` that holds a count (the ECC counters differ between GPU families)."""
    node = gpu.find(path)
    if node is None:
        return {}
    return {
        child.tag: _xml_int(node, child.tag, source) for child in node if _xml_text(node, child.tag) not in _XML_FLAGS
    }


def _clock_events(gpu: ET.Element, source: str) -> dict[str, bool | None]:
    for word in ("event", "throttle"):
        node = gpu.find(f"clocks_{word}_reasons")
        if node is not None:
            return {name: _xml_flag(node, f"clocks_{word}_reason_{name}", source) for name in CLOCK_EVENT_REASONS}
    return dict.fromkeys(CLOCK_EVENT_REASONS)


# Values nvidia-smi prints in place of a reading when the GPU itself is in trouble (not merely "no value").
_GPU_TROUBLE_VALUES = ("[GPU requires reset]", "[GPU is lost]", "[Unknown Error]")


def _xml_gpu(gpu: ET.Element, position: int, source: str) -> dict:
    bus_id = gpu.get("id") or _xml_text(gpu, "pci/pci_bus_id")
    if not bus_id:
        raise NvidiaParseError(source, f"<gpu> number {position} has no id (PCI bus id)")
    where = f"{source} (GPU {bus_id})"
    link = "pci/pci_gpu_link_info"
    hist = "remapped_rows/row_remapper_histogram/row_remapper_histogram_"
    return {
        "index": position,
        "pci_bus_id": bus_id,
        "name": _xml_text(gpu, "product_name"),
        "uuid": _xml_text(gpu, "uuid"),
        "persistence_mode": _xml_flag(gpu, "persistence_mode", where),
        "recovery_action": _xml_text(gpu, "gpu_recovery_action"),
        "trouble": sorted(
            {node.text.strip()[1:-1] for node in gpu.iter() if (node.text or "").strip() in _GPU_TROUBLE_VALUES}
        ),
        "performance_state": _xml_text(gpu, "performance_state"),
        "utilization_gpu": _xml_int(gpu, "utilization/gpu_util", where, "%"),
        "temperature_gpu": _xml_int(gpu, "temperature/gpu_temp", where, "C"),
        "pcie": {
            "gen_current": _xml_int(gpu, f"{link}/pcie_gen/current_link_gen", where),
            "gen_max": _xml_int(gpu, f"{link}/pcie_gen/max_link_gen", where),
            "width_current": _xml_int(gpu, f"{link}/link_widths/current_link_width", where, "x"),
            "width_max": _xml_int(gpu, f"{link}/link_widths/max_link_width", where, "x"),
            "replay_counter": _xml_int(gpu, "pci/replay_counter", where),
        },
        "clock_events": _clock_events(gpu, where),
        "power": {
            "draw_w": _xml_number(gpu, "gpu_power_readings/average_power_draw", where, "W"),
            "draw_instant_w": _xml_number(gpu, "gpu_power_readings/instant_power_draw", where, "W"),
            "limit_w": _xml_number(gpu, "gpu_power_readings/current_power_limit", where, "W"),
            "default_limit_w": _xml_number(gpu, "gpu_power_readings/default_power_limit", where, "W"),
            "max_limit_w": _xml_number(gpu, "gpu_power_readings/max_power_limit", where, "W"),
        },
        "ecc": {
            "enabled": _xml_flag(gpu, "ecc_mode/current_ecc", where),
            "pending_enabled": _xml_flag(gpu, "ecc_mode/pending_ecc", where),
            "volatile": _xml_counts(gpu, "ecc_errors/volatile", where),
            "aggregate": _xml_counts(gpu, "ecc_errors/aggregate", where),
            "sram_threshold_exceeded": _xml_flag(gpu, "ecc_errors/aggregate/sram_threshold_exceeded", where),
            "channel_repair_pending": _xml_flag(gpu, "ecc_errors/channel_repair_pending", where),
            "tpc_repair_pending": _xml_flag(gpu, "ecc_errors/tpc_repair_pending", where),
            "unrepairable_memory": _xml_flag(gpu, "ecc_errors/unrepairable_memory", where),
        },
        "retired_pages": {
            "single_bit": _xml_int(gpu, "retired_pages/multiple_single_bit_retirement/retired_count", where),
            "double_bit": _xml_int(gpu, "retired_pages/double_bit_retirement/retired_count", where),
            "pending_blacklist": _xml_flag(gpu, "retired_pages/pending_blacklist", where),
            "pending_retirement": _xml_flag(gpu, "retired_pages/pending_retirement", where),
        },
        "remapped_rows": {
            "correctable": _xml_int(gpu, "remapped_rows/remapped_row_corr", where),
            "uncorrectable": _xml_int(gpu, "remapped_rows/remapped_row_unc", where),
            "pending": _xml_flag(gpu, "remapped_rows/remapped_row_pending", where),
            "failure": _xml_flag(gpu, "remapped_rows/remapped_row_failure", where),
            "histogram": {
                level: _xml_int(gpu, hist + level, where, "bank(s)")
                for level in ("max", "high", "partial", "low", "none")
            },
        },
    }


def parse_smi_xml(text: str, source: str = "nvidia-smi -q -x") -> dict:
    """Parse ``nvidia-smi -q -x`` into ``{"driver_version", "cuda_version", "attached_gpus", "gpus": [...]}``.

    One record per ``<gpu>`` in output order (which is nvidia-smi's index order), with the health fields:
    ``trouble`` (the distinct ``[GPU requires reset]``, ``[GPU is lost]``, ``[Unknown Error]`` values
    printed in place of readings, brackets dropped), persistence mode, recovery action, utilisation, PCIe
    link (current and max generation and width), clock event reasons (bool per reason), power draw and
    limits (W), ECC mode and counters (volatile and aggregate, whatever counters the GPU family has),
    retired pages, remapped rows and their histogram.
    Values nvidia-smi prints as ``N/A`` (or an element an older driver lacks) are None. A value of the
    wrong shape raises :class:`NvidiaParseError` naming the element and the GPU.
    """
    root = load_smi_xml(text, source)
    attached = root.findtext("attached_gpus")
    if attached is None or not attached.strip().isdigit():
        raise NvidiaParseError(source, "no <attached_gpus> count", str(attached))
    gpus = [_xml_gpu(gpu, position, source) for position, gpu in enumerate(root.findall("gpu"))]
    return {
        "driver_version": (root.findtext("driver_version") or "").strip() or None,
        "cuda_version": (root.findtext("cuda_version") or "").strip() or None,
        "attached_gpus": int(attached.strip()),
        "gpus": gpus,
    }


# --------------------------------------------------------------------------- kernel log: Xid

# ``NVRM: Xid (PCI:0000:2b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.`` (R525+),
# ``NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: ...``, ``NVRM: Xid (0000:03:00): 14, Channel ...``
# (older, no ``PCI:``). Whatever precedes ``NVRM:`` (journal or dmesg time, a kmsg record header) is ignored.
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<domain>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<device>[0-9a-fA-F]{2})"
    r"(?:\.[0-7])?\): (?P<code>\d{1,4})(?:, (?P<rest>.*))?$"
)
_XID_PROCESS_RE = re.compile(
    r"^pid=(?P<pid>'?<unknown>'?|\d{1,10})(?:, name=(?P<name>[^,]{0,256}))?(?:, ?(?P<text>.*))?$"
)
_XID_MARKER = "NVRM: Xid"
_XID_TEXT_LEN = 200
_ISO_TIME_RE = re.compile(r"^(?P<time>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:[+-]\d{2}:?\d{2}|Z)?) ")


def pci_key(bus_id: str) -> str | None:
    """``domain:bus:device`` in lower case with a 4-digit domain (how Xid lines name a GPU), from an
    nvidia-smi bus id (``00000000:2B:00.0``) or an Xid address (``0000:2b:00``); None if it is neither."""
    match = re.match(r"^(?:PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?$", bus_id.strip())
    if not match:
        return None
    return f"{int(match.group(1), 16):04x}:{match.group(2).lower()}:{match.group(3).lower()}"


def _printable(text: str, limit: int) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit])


def parse_xid_lines(text: str) -> dict:
    """The ``NVRM: Xid`` events of a kernel log (journalctl -k, dmesg or /dev/kmsg text).

    Returns ``{"events": [{"pci", "code", "pid", "process", "text", "time"}], "unparsed": [lines]}``:
    ``pci`` as :func:`pci_key` names it, ``pid`` an int or None (``'<unknown>'``), ``time`` the line's
    leading ISO time when it has one (``journalctl -o short-iso``, ``dmesg --time-format iso``).
    A line that says ``NVRM: Xid`` but not in a known shape goes to ``unparsed`` (clipped, control
    characters replaced): the caller decides, nothing is raised for free-form log text.
    """
    events: list[dict] = []
    unparsed: list[str] = []
    for line in text.splitlines():
        at = line.find(_XID_MARKER)
        if at < 0:
            continue
        match = _XID_RE.match(line[at:].rstrip())
        if not match:
            unparsed.append(_printable(line.strip(), _XID_TEXT_LEN))
            continue
        rest = match.group("rest") or ""
        pid = process = None
        proc = _XID_PROCESS_RE.match(rest)
        if proc:
            pid = int(proc.group("pid")) if proc.group("pid").isdigit() else None
            name = (proc.group("name") or "").strip()
            process = None if name in ("<unknown>", "") else _printable(name, 64)
            rest = proc.group("text") or ""
        stamp = _ISO_TIME_RE.match(line)
        events.append(
            {
                "pci": pci_key(f"{match.group('domain')}:{match.group('bus')}:{match.group('device')}"),
                "code": int(match.group("code")),
                "pid": pid,
                "process": process,
                "text": _printable(rest.strip(), _XID_TEXT_LEN),
                "time": stamp.group("time") if stamp else None,
            }
        )
    return {"events": events, "unparsed": unparsed}
