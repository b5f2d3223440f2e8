# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Throughput-gate baselines and history on the controller (stdlib only).

The action plugin ``gpufleet.sglang.throughput_gate`` is a thin shell around these functions:

- a baseline is identified by a structured key (host, model, profile, SGLang version, GPU model)
  stored inside the file; file names are only a readable label plus a hash of that key;
- a baseline holds at least :data:`MIN_TRIALS` valid trials: fewer are never written, and
  reading such a file is an error that says how to re-baseline;
- for a key without a baseline (an SGLang upgrade), the fallback is the baseline of the highest
  earlier SGLang version (PEP 440 ordering) with the same host, model, profile and GPU model;
- anything in the directory that is not a baseline (corrupt, empty, foreign) is an error naming
  the file, never silently skipped (a skipped file could be the one that should have been chosen);
- writes happen under a per-key ``fcntl`` lock, compare-and-swap against the baseline the run was
  compared with, and atomically (temp file, fsync, rename, fsync of the directory);
- secrets (the API key, credentials in the URL) are masked in every string, escaped forms included
  (:mod:`secret_mask`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import shlex
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import replace_file
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.version_order import version_key
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.spec import UNPINNED
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.stats import (
    MIN_TRIALS,
    baseline_spread_problem,
    median,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.startup_metrics import (
    ColdStartError,
    check_cold_start,
)

# Controller-only: no module in plugins/modules may bundle this file, not even through another
# module_utils (tests/unit/test_module_rooms.py walks the imports; docs/CONTRIBUTING.md, "Where code lives").
CONTROLLER_ONLY = True

FORMAT = "gpufleet.sglang/throughput_gate-baseline/1"
KEY_FIELDS = ("host", "model", "model_revision", "profile", "sglang_version", "gpu_model")
# the request shape a baseline was measured with; a run with another shape is not comparable
SHAPE_FIELDS = ("api", "concurrency", "requests_per_trial", "input_len", "output_len")
LOCK_TIMEOUT_S = 60.0
# largest baseline file read (a real one is well under 4 KiB)
MAX_BASELINE_BYTES = 1 << 20

REBASELINE_HINT = (
    f"To start a new baseline on purpose, run the gate with throughput_gate_trials >= {MIN_TRIALS} and "
    "-e throughput_gate_accept_baseline=true -e 'throughput_gate_accept_reason=<why>' "
    "(or move the file out of the baseline directory)."
)


def rebaseline_command(host: str) -> str:
    """The command that re-takes ``host``'s baseline on purpose (roles/throughput_gate/README.md,
    "How to re-baseline"); the inventory is the caller's."""
    return (
        f"ansible-playbook playbooks/bench.yml -i <inventory> --limit {shlex.quote(host)} "
        "-e throughput_gate_accept_baseline=true "
        "-e 'throughput_gate_accept_reason=re-baseline: the old baseline had an outlier trial'"
    )


class BaselineError(ValueError):
    """A baseline file, directory or option that cannot be used; the message names it and the fix."""


# --------------------------------------------------------------------------- key and names


def make_key(**parts: object) -> dict[str, str]:
    """The structured key; every part a non-empty string without control characters.

    ``model_revision`` (the model store's commit the server loads) defaults to ``unpinned``."""
    parts = {**parts, "model_revision": parts.get("model_revision") or UNPINNED}
    key: dict[str, str] = {}
    for name in KEY_FIELDS:
        value = parts.get(name)
        if not isinstance(value, str) or not value.strip():
            raise BaselineError(f"baseline key part {name!r} must be a non-empty string, got {value!r}")
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise BaselineError(f"baseline key part {name!r} contains a control character: {value!r}")
        key[name] = value
    unknown = sorted(set(parts) - set(KEY_FIELDS))
    if unknown:
        raise BaselineError(f"unknown baseline key parts: {', '.join(unknown)}")
    return key


def key_digest(key: dict[str, str]) -> str:
    canonical = json.dumps({k: key[k] for k in KEY_FIELDS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def file_stem(key: dict[str, str]) -> str:
    """``<host>__<model>__<profile>__<version>__<gpu>__<hash>``: readable, unique by the hash."""
    label = "__".join(re.sub(r"[^A-Za-z0-9.-]+", "_", key[k])[:48].strip("_.") or "_" for k in KEY_FIELDS)
    return f"{label}__{key_digest(key)}"


@dataclass(frozen=True)
class Paths:
    directory: str
    baseline: str
    history: str
    lock: str

    @classmethod
    def for_key(cls, directory: str, key: dict[str, str]) -> Paths:
        stem = os.path.join(directory, file_stem(key))
        return cls(directory, stem + ".json", stem + ".history.jsonl", stem + ".lock")


# --------------------------------------------------------------------------- reading


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


@dataclass(frozen=True)
class Baseline:
    path: str
    key: dict[str, str]
    trials: list[float]
    shape: dict[str, object]
    digest: str
    doc: dict[str, object] = field(repr=False)


def parse_baseline(path: str, data: bytes) -> Baseline:
    """Validate one baseline file's bytes; :class:`BaselineError` naming the file otherwise."""
    if not data.strip():
        raise BaselineError(f"baseline file {path} is empty. {REBASELINE_HINT}")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BaselineError(f"baseline file {path} is not valid JSON ({exc}). {REBASELINE_HINT}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BaselineError(
            f'{path} is not a throughput_gate baseline (no "format": "{FORMAT}"): a foreign or older file '
            f"in the baseline directory. Move it out of the directory. {REBASELINE_HINT}"
        )
    key = doc.get("key")
    if not isinstance(key, dict) or sorted(key) != sorted(KEY_FIELDS):
        raise BaselineError(f'baseline file {path} has no valid "key" ({", ".join(KEY_FIELDS)}). {REBASELINE_HINT}')
    try:
        key = make_key(**key)
    except BaselineError as exc:
        raise BaselineError(f"baseline file {path}: {exc}. {REBASELINE_HINT}") from None
    trials = doc.get("trials")
    if not isinstance(trials, list) or not all(_is_number(v) for v in trials):
        raise BaselineError(
            f'baseline file {path}: "trials" must be a list of positive tokens/s numbers. {REBASELINE_HINT}'
        )
    if len(trials) < MIN_TRIALS:
        raise BaselineError(
            f"baseline file {path} has {len(trials)} trials; a baseline needs at least {MIN_TRIALS} "
            f"(with fewer, no regression can ever be significant). {REBASELINE_HINT}"
        )
    spread = baseline_spread_problem(trials)
    if spread:
        raise BaselineError(
            f"baseline file {path}: {spread}. It is not used. Re-take it on purpose (at least {MIN_TRIALS} "
            f"trials): {rebaseline_command(key['host'])}"
        )
    shape = doc.get("shape") if isinstance(doc.get("shape"), dict) else {}
    return Baseline(path, key, [float(v) for v in trials], shape, hashlib.sha256(data).hexdigest(), doc)


def read_file(path: str) -> bytes | None:
    """A file's bytes, None when it does not exist; :class:`BaselineError` for anything else."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BASELINE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BaselineError(f"cannot read baseline file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BASELINE_BYTES:
        raise BaselineError(f"baseline file {path} is larger than {MAX_BASELINE_BYTES} bytes: not a baseline")
    return data


def baseline_files(directory: str) -> list[str]:
    """Every ``*.json`` in the directory (dot files, histories and lock files are not baselines)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise BaselineError(f"cannot list baseline directory {directory}: {exc.strerror or exc}") from None
    return sorted(os.path.join(directory, n) for n in names if n.endswith(".json") and not n.startswith("."))


# --------------------------------------------------------------------------- choosing


@dataclass(frozen=True)
class Choice:
    """The baseline a run is compared with (``baseline`` None: none) and why."""

    baseline: Baseline | None
    exact_digest: str | None  # sha256 of this key's own file when the run started (None: absent)
    fallback: bool
    note: str
    problems: list[str] = field(default_factory=list)  # tolerated only when accepting a new baseline

    @property
    def trials(self) -> list[float]:
        return self.baseline.trials if self.baseline else []


def choose(
    key: dict[str, str],
    exact: tuple[str, bytes | None],
    others: list[tuple[str, bytes]],
    *,
    fallback: bool,
    tolerate: bool = False,
) -> Choice:
    """Choose the baseline for ``key`` (pure).

    ``exact`` is this key's own file (path, bytes or None when absent); ``others`` every other
    baseline file of the directory. With ``tolerate`` (accepting a new baseline) problems are
    returned instead of raised, and the run is compared with what remains usable.
    """
    problems: list[str] = []

    def fail(exc: BaselineError) -> None:
        if not tolerate:
            raise exc
        problems.append(str(exc))

    path, data = exact
    if data is not None:
        digest = hashlib.sha256(data).hexdigest()
        try:
            own = parse_baseline(path, data)
            if own.key != key:
                raise BaselineError(
                    f"baseline file {path} belongs to another key ({json.dumps(own.key, sort_keys=True)}), not "
                    f"{json.dumps(key, sort_keys=True)}: a foreign file under this key's name. Move it away. "
                    f"{REBASELINE_HINT}"
                )
        except BaselineError as exc:
            fail(exc)
            return Choice(None, digest, False, "this key's baseline is unusable", problems)
        return Choice(own, digest, False, f"this key's baseline {os.path.basename(path)}")
    if not fallback:
        return Choice(None, None, False, "no baseline for this key (fallback off)")
    current = version_key(key["sglang_version"])
    if current is None:
        return Choice(
            None, None, False, f"no baseline for this key; SGLang version {key['sglang_version']!r} has no order"
        )
    best: tuple[tuple, Baseline] | None = None
    for other_path, other_data in others:
        try:
            cand = parse_baseline(other_path, other_data)
        except BaselineError as exc:
            fail(exc)
            continue
        if any(cand.key[k] != key[k] for k in KEY_FIELDS if k not in ("sglang_version", "model_revision")):
            continue
        ver = version_key(cand.key["sglang_version"])
        # an earlier SGLang version, or the same version serving another model revision (a new
        # revision is gated against the baseline of the one it replaces, like a new release)
        if ver is None or ver > current or (ver == current and cand.key["model_revision"] == key["model_revision"]):
            continue
        rank = (ver, str(cand.doc.get("updated", "")))
        if best is None or rank > best[0]:
            best = (rank, cand)
    if best is None:
        return Choice(
            None, None, False, "no baseline for this key, an earlier SGLang version or model revision", problems
        )
    chosen = best[1]
    what = (
        f"SGLang {chosen.key['sglang_version']}"
        if chosen.key["sglang_version"] != key["sglang_version"]
        else f"model revision {chosen.key['model_revision'][:12]}"
    )
    return Choice(
        chosen,
        None,
        True,
        f"fallback: baseline of {what} ({os.path.basename(chosen.path)})",
        problems,
    )


def shape_of(args: dict[str, object]) -> dict[str, object]:
    """The request-shape options the task sets (numbers as int, so ``"8"`` and ``8`` agree)."""
    shape: dict[str, object] = {}
    for k in SHAPE_FIELDS:
        if k in args and args[k] is not None:
            v = args[k]
            if k != "api":
                with contextlib.suppress(TypeError, ValueError):
                    v = int(v)  # type: ignore[call-overload]
            shape[k] = v if k != "api" else str(v)
    return shape


def shape_mismatch(stored: dict[str, object], current: dict[str, object]) -> list[str]:
    """Shape fields both sides name and that differ, as ``name: stored -> current``."""
    return [
        f"{k}: {stored[k]!r} -> {current[k]!r}"
        for k in SHAPE_FIELDS
        if k in stored and k in current and stored[k] != current[k]
    ]


# --------------------------------------------------------------------------- deciding what to write


def write_decision(
    result: dict[str, object],
    *,
    exact_exists: bool,
    update: bool,
    accept: bool,
) -> tuple[bool, str]:
    """Whether this run's trials become the baseline, and why (pure)."""
    problem = _trials_problem(result.get("valid_trial_values") or [])
    if problem:
        return False, problem
    verdict, reason = result.get("verdict"), result.get("reason")
    if accept:
        if reason in ("invalid_trials", "not_ready", "error", "below_floor", "check_mode"):
            return False, f"not accepted: the run did not measure a usable result ({reason})"
        return True, "accepted on purpose (accept_baseline)"
    if result.get("failed") or verdict != "pass":
        return False, f"the gate did not pass ({verdict}/{reason})"
    return _passing_decision(exact_exists=exact_exists, update=update)


def _trials_problem(values: object) -> str | None:
    """Why the run's trial values cannot be a baseline, or None."""
    if not isinstance(values, list) or not all(_is_number(v) for v in values):
        return "the run returned no valid trial values"
    if len(values) < MIN_TRIALS:
        return f"the run has {len(values)} valid trials; a baseline needs at least {MIN_TRIALS}"
    spread = baseline_spread_problem(values)
    if spread:
        return f"the run's trials cannot be a baseline: {spread}"
    return None


def _passing_decision(*, exact_exists: bool, update: bool) -> tuple[bool, str]:
    if not exact_exists:
        return True, "first baseline for this key"
    if update:
        return True, "update_baseline from a passing run"
    return False, "a baseline exists (update_baseline is off)"


def baseline_document(
    key: dict[str, str], values: list[float], shape: dict[str, object], when: str, accepted: dict[str, str] | None
) -> dict[str, object]:
    if len(values) < MIN_TRIALS or not all(_is_number(v) for v in values):
        raise BaselineError(f"refusing to write a baseline of {len(values)} trials (needs >= {MIN_TRIALS})")
    doc: dict[str, object] = {
        "format": FORMAT,
        "key": {k: key[k] for k in KEY_FIELDS},
        "updated": when,
        "shape": shape,
        "median_output_tokens_per_s": round(median(values), 3),
        "trials": list(values),
    }
    if accepted:
        doc["accepted"] = accepted
    return doc


# --------------------------------------------------------------------------- files


def check_writable(directory: str, *, create: bool) -> str | None:
    """None when baselines can be written in ``directory``, else why not.

    Writes and removes a probe file (``os.access`` is always true for root). With ``create``
    false (check mode) a missing directory is reported instead of created.
    """
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            return f"baseline directory {directory} exists but is not a directory"
        if not create:
            return None  # check mode: would be created
        try:
            os.makedirs(directory, mode=0o755, exist_ok=True)
        except OSError as exc:
            return f"cannot create baseline directory {directory}: {exc.strerror or exc}"
    if not create:
        return None if os.access(directory, os.W_OK | os.X_OK) else f"baseline directory {directory} is not writable"
    return _probe_write(directory)


def _probe_write(directory: str) -> str | None:
    """Write, fsync and remove a probe file in ``directory``; None when that worked, else why not."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".gpufleet-probe-", dir=directory)
    except OSError as exc:
        return f"baseline directory {directory} is not writable: {exc.strerror or exc}"
    try:
        os.write(fd, b"probe")
        os.fsync(fd)
    except OSError as exc:
        return f"baseline directory {directory} is not writable: {exc.strerror or exc}"
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
    return None


@contextlib.contextmanager
def locked(path: str, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created 0644), waiting at most ``timeout`` seconds."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BaselineError(f"cannot open lock file {path}: {exc.strerror or exc}") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise BaselineError(f"cannot lock {path}: {exc.strerror or exc}") from None
                if time.monotonic() >= deadline:
                    raise BaselineError(
                        f"another run has held the baseline lock {path} for more than {timeout:g}s; "
                        "wait for it to finish (the lock is released when its process ends)"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def atomic_write(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` (mode 0644) crash-safely: :func:`atomic_file.replace_file`."""
    replace_file(path, text.encode("utf-8"), mode=0o644)


def append_line(path: str, line: str) -> None:
    """Append one line with a single write (after a newline if a crash left the last line open)."""
    if "\n" in line or "\r" in line:
        raise BaselineError("a history line must not contain a line break")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        prefix = ""
        if size:
            with open(path, "rb") as f:
                f.seek(size - 1)
                prefix = "" if f.read(1) == b"\n" else "\n"
        os.write(fd, (prefix + line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Commit:
    written: bool
    note: str
    record: dict[str, object]


def commit(
    paths: Paths,
    record: dict[str, object],
    new_baseline: dict[str, object] | None,
    *,
    expected_digest: str | None,
    accept: bool,
    timeout: float = LOCK_TIMEOUT_S,
) -> Commit:
    """Under the key's lock: write ``new_baseline`` if the file is still the one the run saw
    (``expected_digest``; None = absent) or the run accepts on purpose, then append ``record``
    (with the outcome) to the history. Nothing is written when the lock cannot be taken."""
    with locked(paths.lock, timeout):
        written, note = False, "not written"
        if new_baseline is not None:
            data = read_file(paths.baseline)
            now = None if data is None else hashlib.sha256(data).hexdigest()
            if now != expected_digest and not accept:
                note = "not written: another run changed this key's baseline during the measurement"
            else:
                atomic_write(paths.baseline, json.dumps(new_baseline, indent=2, sort_keys=True) + "\n")
                written, note = True, "written"
        record = dict(record, baseline_written=written, baseline_write_note=note)
        append_line(paths.history, json.dumps(record, sort_keys=True, separators=(",", ":")))
        return Commit(written, note, record)


def run_record(
    key: dict[str, str],
    result: dict[str, object],
    info: dict[str, object],
    shape: dict[str, object],
    *,
    when: str,
    accepted: dict[str, str] | None,
    gpu_health: dict[str, str] | None = None,
    cold_start: object = None,
) -> dict[str, object]:
    """One run as the history stores it and the role publishes it (``throughput_gate_result``); ``gpu_health``
    (level, verdict) is the node's GPU health when it ran, None when not checked. ``cold_start`` (the server's
    start this run saw, startup_metrics.check_cold_start) is kept checked as ``cold_start``; absent when not
    given; one of the wrong shape is left out and ``cold_start_problem`` says why."""
    ready = result.get("ready") if isinstance(result.get("ready"), dict) else {}
    record: dict[str, object] = {
        "host": key["host"],
        "key": {k: key[k] for k in KEY_FIELDS},
        "time": when,
        "failed": bool(result.get("failed")),
        "verdict": result.get("verdict", "unknown"),
        "reason": result.get("reason", ""),
        "msg": result.get("msg", ""),
        "median_output_tokens_per_s": result.get("median_output_tokens_per_s"),
        "baseline_median": result.get("baseline_median"),
        "baseline_trials": result.get("baseline_trials"),
        "baseline_file": info.get("file"),
        "baseline_source": info.get("source"),
        "baseline_source_sglang_version": info.get("source_sglang_version"),
        "baseline_fallback": bool(info.get("fallback")),
        "baseline_problems": info.get("problems") or [],  # tolerated when accepting a new baseline
        "delta_pct": result.get("delta_pct"),
        "p_value": result.get("p_value"),
        "trials": result.get("valid_trial_values") or [],
        "invalid_trials": result.get("invalid_trials", 0),
        "extra_round": bool(result.get("extra_round")),
        "server_version": ready.get("version"),  # type: ignore[union-attr]
        "telemetry": result.get("telemetry") or {},
        "host_summary_row": host_summary_row(key["host"], result, gpu_health),
        "shape": shape,
        "gpu_health": {"level": gpu_health["level"], "verdict": gpu_health["verdict"]} if gpu_health else None,
    }
    if accepted:
        record["accepted"] = accepted
    if cold_start:
        try:
            record["cold_start"] = check_cold_start(cold_start)
        except ColdStartError as exc:
            record["cold_start_problem"] = f"{exc}; left out"
    return record


# --------------------------------------------------------------------------- summary


def host_summary_row(host: str, result: dict[str, object], gpu_health: dict[str, str] | None = None) -> str:
    """The host's summary row: the host in front of the module's summary row (the role's play-end table),
    and the GPU health verdict at its end when it was checked (``; gpu degraded: ...``)."""
    row = result.get("summary_row")
    health = f"; gpu {' '.join(str(gpu_health['verdict']).split())}" if gpu_health else ""
    if isinstance(row, str) and row:
        return f"{host:<24} {row}{health}"
    msg = str(result.get("msg", "")).replace("\n", " ")
    return f"{host:<24} {'FAIL':<8} {msg[:80] + ('...' if len(msg) > 80 else '')}{health}"
