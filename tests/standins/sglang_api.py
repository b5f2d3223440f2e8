# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""STAND-IN for an SGLang HTTP server (``python -m sglang.launch_server``). Not SGLang.

What it stands in for: the HTTP API of an SGLang server (0.5.x), as in docs/sglang-versions-and-flags.md,
so the sglang_server role and the throughput_gate module can be tested on a machine without a GPU.
No model runs here: tokens are synthetic and produced at a configurable aggregate rate.

Real formats it follows:
- ``GET /health``, ``/health_generate``: 200 once ready, 503 while "starting" (JIT + autotune).
- ``GET /ready``: the same readiness (0.5.23).
- ``GET /server_info`` (and deprecated ``/get_server_info``): the server args it was started with,
  keys = flag names with dashes turned to underscores, plus ``version``, ``model_path``, ``host``,
  ``port``.
- ``GET /model_info``, ``GET /v1/models``.
- ``POST /generate``: ``text`` or ``input_ids``; ``sampling_params`` {``max_new_tokens`` (default 128),
  ``ignore_eos`` (default false), ...}; ``stream``. Response ``{"text", "output_ids", "meta_info":
  {"id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency"}}``.
  Streaming: ``data: {json}\\n\\n`` events, then ``data: [DONE]\\n\\n``, sent with
  ``Transfer-Encoding: chunked`` (as uvicorn does). Text and ids are cumulative by default, deltas
  with ``--incremental-streaming-output``; ``completion_tokens`` is always a running total.
  ``--stream-interval N`` sends an event every N tokens (and for the first and the last token).
  Stale intermediate events are coalesced for a slow client (its socket buffer is full): the next
  event carries everything since the last one sent, so events are not tokens.
- ``POST /v1/completions``: OpenAI chunks with text deltas; with ``stream_options.include_usage`` a
  last chunk with ``choices: []`` and ``usage``; ``stream_options.continuous_usage_stats`` adds usage
  to every chunk. Then ``data: [DONE]``.
- ``GET /metrics`` (only with ``--enable-metrics``, as in SGLang): Prometheus text with
  ``sglang:generation_tokens_total``, ``sglang:prompt_tokens_total``, ``sglang:gen_throughput``,
  ``sglang:num_running_reqs``, ``sglang:num_queue_reqs`` (waiting past the running cap), and, once
  the simulated engine has started, the start's phases as SGLang 0.5.23 exports them
  (``sglang/srt/observability/metrics_collector.py`` ``emit_startup_time``, docs/monitoring.md):
  ``sglang:startup_time_seconds{model_name,engine_type,phase}`` for ``load_weight``,
  ``kv_cache_allocation``, ``scheduler_e2e``, ``tokenizer_e2e``, and
  ``sglang:startup_cuda_graph_time_seconds{model_name,engine_type,phase}`` for the six capture families
  (0 for those not captured). The seconds are the ones the stand-in spent: ``STANDIN_STARTUP_DELAY_S``
  is spent in SGLang's order (START_SHARES: weights 50 %, KV cache 10 %, decode-graph capture 30 %,
  then the HTTP warm-up 10 % after the gauges are set and before readiness), each phase timed with
  ``time.perf_counter``; ``tokenizer_e2e`` runs from the process start, as SGLang's from its launch.
- ``POST /abort_request`` ``{"rid", "abort_all"}`` (SGLang's AbortReq): the requests end at once with
  ``finish_reason`` ``{"type": "abort"}``; 200, empty body.
- ``--api-key K``: requests need ``Authorization: Bearer K`` (401 otherwise); ``/health*``,
  ``/ready`` and ``/metrics`` are exempt.
- Mid-stream errors are sent as ``data: {"error": {"message": ...}}`` followed by ``data: [DONE]``;
  request errors as ``{"error": {"message": ...}}`` with a 4xx/5xx status.

- At start, the line SGLang 0.5.23 logs on stderr before it serves (``sglang/srt/entrypoints/engine.py``,
  ``logger.info(f"server_args={...}")`` with the format ``[%(asctime)s] %(message)s``): the resolved
  arguments as a Python dict, ``api_key`` and ``admin_api_key`` included as given (SGLang redacts only
  watermark keys), e.g. ``[2026-12-01 10:00:00] server_args={'model_path': '/m', ..., 'api_key': 'K', ...}``.
  The stand-in's dict holds the flags it was given (numbers as ints), plus ``api_key`` and
  ``admin_api_key`` (None when not set).
- ``--config FILE.yaml`` (SGLang >= 0.5.3): options read from a YAML mapping and put before the other
  command-line flags (so the command line wins), the way SGLang's ``ConfigArgumentMerger`` does: the
  file must end in .yaml/.yml and hold a mapping; ``key: true`` is the bare ``--key`` (``false``
  leaves it out: the stand-in has no parser to tell switches from valued flags), a list gives
  ``--key v1 v2``, a mapping its JSON text, anything else ``--key value``. Read with PyYAML when it
  is installed, else as JSON (the subset of YAML the sglang_server role writes).

Usage:
    python3 sglang_api.py --model-path M [--host 127.0.0.1] [--port 30000] [any other --flag [value]]
    python3 sglang_api.py --config /etc/sglang/sglang-server.yaml
Any ``--flag value`` is accepted (a ``--x`` followed by a token that does not start with ``--`` takes
it as its value; otherwise it is a boolean true). ``--port 0`` picks a free port; the bound port is
printed on stdout as ``STANDIN_LISTENING <host> <port>`` and ``--port-file PATH`` writes it to PATH.

Knobs (environment):
    STANDIN_STARTUP_DELAY_S   seconds of simulated start (weights, KV cache, CUDA graphs, warm-up: the
                              phases /metrics reports) before readiness turns 200 (default 0)
    STANDIN_JIT_COLD_S        seconds of a ``jit`` start phase (before the CUDA graphs) when
                              $SGLANG_CACHE_DIR lacks this version's and flags' kernels; the cold start
                              writes them there (standin_jit.py). Default 0: no jit phase
    STANDIN_JIT_WARM_S        seconds of that phase when the kernels are there (default 5 % of cold)
    STANDIN_TOKENS_PER_S      aggregate output tokens/s shared by all running requests, like one batch
                              decoding: each step gives every running request one token and lasts
                              running/rate seconds; 0 = as fast as possible (default 0)
    STANDIN_REQUEST_TOKENS_PER_S  with STANDIN_TOKENS_PER_S, the most one request decodes per second (a
                              step lasts at least 1/this): a node reaches its aggregate rate only with
                              enough requests running, as batching GPUs do, so at part load it runs
                              several streams instead of idling between fast ones (default 0 = no cap)
    STANDIN_BURST_STEPS       with STANDIN_TOKENS_PER_S=0, decode up to this many steps (at most 50 ms)
                              before writing each stream's events in one send, as a loaded server's
                              output batching does; events stay separate SSE events (default 8)
    STANDIN_SGLANG_VERSION    version reported by /server_info (default 0.5.23)
    STANDIN_MAX_RUNNING       cap of concurrently decoding requests, the rest wait (default: flag
                              --max-running-requests, else unlimited)
    STANDIN_EOS_AFTER         without ignore_eos, stop after this many tokens with finish_reason
                              "stop" (default 0 = never)
    STANDIN_FAULT             injected fault for generation requests, one of:
                              http500           respond 500 with an error body
                              midstream_error   an error event after a few tokens, then [DONE]
                              malformed_sse     a broken JSON event after a few tokens
                              short_tokens      finish (reason "length") at half of max_new_tokens
                              drop_connection   close the socket after a few tokens
                              malformed_middle  a broken JSON event that still carries a count, mid-stream;
                                                the stream then goes on to the right count and [DONE]
                              error_with_counts an error event that also carries meta_info/usage counts,
                                                mid-stream; the stream then goes on normally
                              after_done        a normal stream, then one more event after data: [DONE]
                              huge_event        one event of STANDIN_HUGE_EVENT_BYTES (default 8 MiB) mid-stream
                              endless_stream    after a few tokens, events that repeat the same count forever
                              trickle_head      the response head, one byte per STANDIN_TRICKLE_S, forever
                              trickle_body      the head, then the stream one byte per STANDIN_TRICKLE_S, forever
    STANDIN_HEALTH_FAULT      answer of GET /health and /health_generate: 401, 403, redirect (302 to
                              /elsewhere), trickle_head or trickle_body (as above, forever)
    STANDIN_TRICKLE_S         seconds between trickled bytes (default 1)
    STANDIN_FAULT_EVERY       apply the fault to every N-th generation request (default 1 = all)
    STANDIN_FAULT_AFTER       only to requests after the first N generation requests (default 0)
    STANDIN_FAULT_COUNT       apply the fault at most N times (default 0 = no limit)
    STANDIN_SURFACE           a JSON response surface (below): the server's rate and fate depend on its flags

Response surface (``STANDIN_SURFACE=/path/surface.json``), so a sweep of server options has something
to find; the stand-in stands in for how real flags change a real server's throughput or kill it::

    {"base_tokens_per_s": 1000,
     "factors": {"attention_backend": {"flashinfer": 1.0, "triton": 1.4}, ...},
     "interactions": [{"when": {"attention_backend": "triton", "disable_cuda_graph": "true"}, "factor": 1.2}],
     "failures": [{"when": {"attention_backend": "fa3"}, "mode": "crash", "message": "..."}, ...]}

Flag values are compared as text after the ``--config`` merge: a switch is ``"true"``, an absent flag
``"absent"``. The rate is the base x the factor of every flag's value (1 when not listed) x the factor
of every interaction whose ``when`` matches. The base is STANDIN_TOKENS_PER_S when set (so a lab keeps
its rate for the profile it deploys), else the surface's ``base_tokens_per_s``. The first
failure whose ``when`` matches decides the fate: ``crash`` (the message on stderr, exit 1 before
listening, as a server refusing a backend at start), ``oom`` (after ``after_s`` seconds, default 1, a
PyTorch ``CUDA out of memory`` error on stderr and exit 1, as a KV cache too large for the GPU), or
``never_ready`` (listens, but readiness stays 503 forever, as a hung JIT compile or NCCL init).
The chosen rate or fate is printed on stdout as ``STANDIN_SURFACE <json>``.

SIGTERM and SIGINT stop it cleanly (exit 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_FAULTS = (
    "http500",
    "midstream_error",
    "malformed_sse",
    "short_tokens",
    "drop_connection",
    "malformed_middle",
    "error_with_counts",
    "after_done",
    "huge_event",
    "endless_stream",
    "trickle_head",
    "trickle_body",
)
_MIDSTREAM_FAULTS = ("midstream_error", "malformed_sse", "drop_connection", "endless_stream")
_ONE_EVENT_FAULTS = ("malformed_middle", "error_with_counts", "huge_event")  # one bad event, then normal
_TRICKLE_FAULTS = ("trickle_head", "trickle_body")
_LAUNCHED = time.perf_counter()  # the process start: SGLang's tokenizer_e2e counts from its launch

# The simulated start: (phase, share of STANDIN_STARTUP_DELAY_S), spent in this order. A phase
# "cuda_graph:<family>" is a CUDA-graph capture; "warmup" (SGLang's HTTP warm-up request) comes after
# the gauges are set, so /metrics has them shortly before readiness, as with SGLang.
START_SHARES = (("load_weight", 0.5), ("kv_cache_allocation", 0.1), ("cuda_graph:decode", 0.3), ("warmup", 0.1))
CUDA_GRAPH_FAMILIES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
_HEALTH_FAULTS = ("401", "403", "redirect", "trickle_head", "trickle_body")
_VOCAB = 97
_PIECES = [f" w{i}" for i in range(_VOCAB)]
_PIECES_B = [p.encode() for p in _PIECES]
_IDS_B = [str(1000 + i).encode() for i in range(_VOCAB)]
_COALESCE_HIGH_WATER = 256 * 1024


def merge_config(argv: list[str]) -> list[str]:
    """``argv`` with ``--config FILE`` replaced by the file's options, put first (see the header)."""
    where = [i for i, tok in enumerate(argv) if tok == "--config"]
    if not where:
        return argv
    index, path = _config_path(argv, where)
    return config_argv(_read_config(path)) + argv[:index] + argv[index + 2 :]


def _config_path(argv: list[str], where: list[int]) -> tuple[int, str]:
    """The index of the one ``--config`` and its YAML file, refused as SGLang refuses them."""
    if len(where) > 1:
        raise SystemExit("sglang_api stand-in: Multiple config files specified! Only one allowed.")
    index = where[0]
    if index == len(argv) - 1:
        raise SystemExit("sglang_api stand-in: No config file specified after --config flag!")
    path = argv[index + 1]
    if not path.lower().endswith((".yaml", ".yml")):
        raise SystemExit(f"sglang_api stand-in: Config file must be YAML format, got: {path}")
    return index, path


def _read_config(path: str) -> dict:
    """The config file's mapping (YAML, or JSON where PyYAML is missing); empty is ``{}``."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SystemExit(f"sglang_api stand-in: cannot read config file {path}: {exc}") from None
    try:
        import yaml  # noqa: PLC0415 - optional: the test images have no PyYAML

        data = yaml.safe_load(text)
    except ImportError:
        try:
            data = json.loads(text) if text.strip() else None
        except ValueError as exc:
            raise SystemExit(f"sglang_api stand-in: {path}: not JSON and PyYAML is not installed: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SystemExit("sglang_api stand-in: Config file must contain a dictionary at root level")
    return data


def config_argv(data: dict, kinds: dict[str, str] | None = None) -> list[str]:
    """A config mapping as command-line tokens, as SGLang 0.5.23's ConfigArgumentMerger._convert_config_to_args
    makes them: for a bool flag (every flag where ``kinds``, the flags' kinds by name, is not given) true is
    a bare flag and false is left out, any other flag's bool is ``true``/``false``; [] is left out."""
    merged: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool):
            if kinds is None or kinds.get(f"--{key}") == "bool":
                merged += [f"--{key}"] if value else []
            else:
                merged += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            merged += [f"--{key}", *(str(item) for item in value)] if value else []
        elif isinstance(value, dict):
            merged += [f"--{key}", json.dumps(value)]
        else:
            merged += [f"--{key}", str(value)]
    return merged


SURFACE_MODES = ("crash", "oom", "never_ready")


def surface_value(flags: dict[str, object], name: str) -> str:
    """A flag's value as the surface compares it: text, ``"true"`` for a switch, ``"absent"``."""
    value = flags.get(name.replace("-", "_"))
    if value is None:
        return "absent"
    if value is True:
        return "true"
    return str(value)


def _surface_text(want: object) -> str:
    return str(want).lower() if isinstance(want, bool) else str(want)


def _matches(flags: dict[str, object], when: dict[str, object]) -> bool:
    return all(surface_value(flags, name) == _surface_text(want) for name, want in when.items())


def load_surface(path: str) -> dict[str, object]:
    """Read and check a response surface file (see the header); a bad one stops the stand-in."""
    try:
        with open(path, encoding="utf-8") as fh:
            surface = json.load(fh)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"sglang_api stand-in: STANDIN_SURFACE={path}: {exc}") from None
    if not isinstance(surface, dict) or not isinstance(surface.get("base_tokens_per_s"), (int, float)):
        raise SystemExit(f"sglang_api stand-in: STANDIN_SURFACE={path}: needs a mapping with base_tokens_per_s")
    for failure in surface.get("failures", []):
        if failure.get("mode") not in SURFACE_MODES:
            raise SystemExit(
                f"sglang_api stand-in: STANDIN_SURFACE={path}: failure mode {failure.get('mode')!r}; "
                f"expected one of {', '.join(SURFACE_MODES)}"
            )
    return surface


def surface_outcome(surface: dict[str, object], flags: dict[str, object]) -> dict[str, object]:
    """``{"mode": "serve", "tokens_per_s": r}`` or the first matching failure (pure; see the header)."""
    for failure in surface.get("failures", []):  # type: ignore[union-attr]
        if _matches(flags, failure.get("when", {})):
            return {
                "mode": failure["mode"],
                "message": failure.get("message", failure["mode"]),
                "after_s": float(failure.get("after_s", 1.0)),
            }
    rate = float(surface["base_tokens_per_s"])  # type: ignore[arg-type]
    for name, table in (surface.get("factors") or {}).items():  # type: ignore[union-attr]
        rate *= float(table.get(surface_value(flags, name), 1.0))
    for inter in surface.get("interactions", []):  # type: ignore[union-attr]
        if _matches(flags, inter.get("when", {})):
            rate *= float(inter.get("factor", 1.0))
    return {"mode": "serve", "tokens_per_s": round(rate, 3)}


def parse_flags(argv: list[str]) -> dict[str, object]:
    """Parse ``--flag [value]`` pairs; keys with dashes turned to underscores."""
    flags: dict[str, object] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("--") or len(tok) == 2:
            raise SystemExit(f"sglang_api stand-in: unexpected argument {tok!r}; expected --flag [value]")
        name, eq, inline = tok[2:].partition("=")
        key = name.replace("-", "_")
        if eq:
            flags[key] = inline
            i += 1
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            flags[key] = argv[i + 1]
            i += 2
        else:
            flags[key] = True
            i += 1
    return flags


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"sglang_api stand-in: {name}={raw!r} is not a number") from None
    if value < 0:
        raise SystemExit(f"sglang_api stand-in: {name}={raw!r} must be >= 0")
    return value


def _start_settings() -> tuple[float, float, float, str]:
    """STANDIN_STARTUP_DELAY_S, STANDIN_JIT_COLD_S, STANDIN_JIT_WARM_S and the cache directory."""
    cold = _env_float("STANDIN_JIT_COLD_S", 0.0)
    return (
        _env_float("STANDIN_STARTUP_DELAY_S", 0.0),
        cold,
        _env_float("STANDIN_JIT_WARM_S", cold * 0.05),
        os.environ.get("SGLANG_CACHE_DIR", ""),
    )


def _label_value(text: str) -> str:
    """A Prometheus label value escaped as the text format wants it (backslash, quote, newline)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _json_bytes(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class Config:
    def __init__(self, flags: dict[str, object]) -> None:
        self.flags = flags
        if not isinstance(flags.get("model_path"), str):
            raise SystemExit("sglang_api stand-in: --model-path M is required")
        self.model_path = str(flags["model_path"])
        self.host = str(flags.get("host", "127.0.0.1"))
        try:
            self.port = int(str(flags.get("port", 30000)))
        except ValueError:
            raise SystemExit(f"sglang_api stand-in: --port {flags.get('port')!r} is not an integer") from None
        self.api_key = flags.get("api_key") if isinstance(flags.get("api_key"), str) else None
        self.incremental = bool(flags.get("incremental_streaming_output"))
        try:
            self.stream_interval = max(1, int(str(flags.get("stream_interval", 1))))
        except ValueError:
            raise SystemExit("sglang_api stand-in: --stream-interval must be an integer") from None
        self.enable_metrics = bool(flags.get("enable_metrics"))
        self.served_model_name = str(flags.get("served_model_name", self.model_path))
        self.version = os.environ.get("STANDIN_SGLANG_VERSION", "0.5.23")
        self.startup_delay, self.jit_cold_s, self.jit_warm_s, self.cache_dir = _start_settings()
        # the aggregate rate, and the most one request gets of it
        self.rate, self.request_rate = (
            _env_float("STANDIN_TOKENS_PER_S", 0.0),
            _env_float("STANDIN_REQUEST_TOKENS_PER_S", 0.0),
        )
        max_running = os.environ.get("STANDIN_MAX_RUNNING") or flags.get("max_running_requests") or 0
        try:
            self.max_running = int(str(max_running))
        except ValueError:
            raise SystemExit(f"sglang_api stand-in: max running {max_running!r} is not an integer") from None
        self.eos_after = int(_env_float("STANDIN_EOS_AFTER", 0))
        self.fault = os.environ.get("STANDIN_FAULT", "")
        if self.fault and self.fault not in _FAULTS:
            raise SystemExit(f"sglang_api stand-in: STANDIN_FAULT={self.fault!r}; expected one of {', '.join(_FAULTS)}")
        self.health_fault = os.environ.get("STANDIN_HEALTH_FAULT", "")
        if self.health_fault and self.health_fault not in _HEALTH_FAULTS:
            raise SystemExit(
                f"sglang_api stand-in: STANDIN_HEALTH_FAULT={self.health_fault!r}; "
                f"expected one of {', '.join(_HEALTH_FAULTS)}"
            )
        self.trickle_s = _env_float("STANDIN_TRICKLE_S", 1.0)
        self.huge_event_bytes = int(_env_float("STANDIN_HUGE_EVENT_BYTES", 8 << 20))
        self.fault_every = max(1, int(_env_float("STANDIN_FAULT_EVERY", 1)))
        self.fault_after = int(_env_float("STANDIN_FAULT_AFTER", 0))
        self.fault_count = int(_env_float("STANDIN_FAULT_COUNT", 0))
        self.burst_steps = max(1, int(_env_float("STANDIN_BURST_STEPS", 8)))
        self.surface: dict[str, object] = {"mode": "serve"}
        surface_path = os.environ.get("STANDIN_SURFACE", "")
        if surface_path:
            surface = load_surface(surface_path)
            if self.rate > 0:
                surface = dict(surface, base_tokens_per_s=self.rate)
            self.surface = surface_outcome(surface, flags)
            print(f"STANDIN_SURFACE {json.dumps(self.surface, sort_keys=True)}", flush=True)
            if self.surface["mode"] == "serve":
                self.rate = float(self.surface["tokens_per_s"])  # type: ignore[arg-type]
            elif self.surface["mode"] == "never_ready":
                self.startup_delay = 1e9  # readiness never comes


class Request:
    """One generation request being decoded."""

    __slots__ = (
        "api",
        "completion_id",
        "continuous_usage",
        "created",
        "done",
        "fault",
        "include_usage",
        "k",
        "max_new",
        "prompt_tokens",
        "proto",
        "rid",
        "sent_k",
        "start",
        "stop_at",
        "stream",
    )

    def __init__(
        self, proto: HTTPProtocol, rid: str, api: str, *, prompt_tokens: int, max_new: int, stream: bool
    ) -> None:
        self.proto = proto
        self.rid = rid
        self.api = api
        self.prompt_tokens = prompt_tokens
        self.max_new = max_new
        self.stop_at = max_new
        self.stream = stream
        self.k = 0
        self.sent_k = 0
        self.start = time.time()
        self.done = False
        self.fault = ""
        self.include_usage = False
        self.continuous_usage = False
        self.completion_id = ""
        self.created = int(self.start)


class _Sequence:
    """The synthetic token sequence every request decodes, pre-rendered so that an event's
    (cumulative or incremental) text and ids are one slice each: views of immutable bytes, so a
    cumulative event of k tokens is copied once (into the event), not three times."""

    def __init__(self) -> None:
        self.text = bytearray()
        self.ids = bytearray()
        self.text_off = [0]
        self.ids_off = [0]
        self.text_view = memoryview(b"")
        self.ids_view = memoryview(b"")

    def _grow(self, n: int) -> None:
        n = max(n, 2 * len(self.text_off))  # doubling: the copies below stay linear in the length
        while len(self.text_off) <= n:
            i = len(self.text_off) - 1
            self.text += _PIECES_B[i % _VOCAB]
            if i:
                self.ids += b","
            self.ids += _IDS_B[i % _VOCAB]
            self.text_off.append(len(self.text))
            self.ids_off.append(len(self.ids))
        self.text_view = memoryview(bytes(self.text))
        self.ids_view = memoryview(bytes(self.ids))

    def slices(self, a: int, b: int) -> tuple[memoryview, memoryview]:
        if b >= len(self.text_off):
            self._grow(b + 1024)
        ids_a = self.ids_off[a] + (1 if a else 0)
        return self.text_view[self.text_off[a] : self.text_off[b]], self.ids_view[ids_a : self.ids_off[b]]


_SEQ = _Sequence()


def _text(a: int, b: int) -> str:
    return "".join(_PIECES[i % _VOCAB] for i in range(a, b))


def _ids(a: int, b: int) -> list[int]:
    return [1000 + i % _VOCAB for i in range(a, b)]


class Engine:
    """Decodes all running requests in lock-step at an aggregate token rate."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.running: list[Request] = []
        self.waiting: list[Request] = []
        self.wake = asyncio.Event()
        self.started = asyncio.Event()
        self.startup: dict[str, object] | None = None  # the start's phases once the engine is up
        self.generation_tokens_total = 0
        self.prompt_tokens_total = 0
        self.requests_seen = 0
        self.faults_applied = 0
        self.recent: list[tuple[float, int]] = []
        self.next_rid = 0
        self.dirty: set[HTTPProtocol] = set()

    def ready(self) -> bool:
        return self.started.is_set()

    async def start(self) -> None:
        """Spend the start (START_SHARES of the startup delay), timing each phase; then readiness. A zero
        delay does not yield, so a server started with none is ready before it answers anything."""
        scheduler_tic = time.perf_counter()
        spent: dict[str, float] = {}
        for phase, share in START_SHARES:
            if phase.startswith("cuda_graph:") and self.cfg.jit_cold_s > 0 and "jit" not in spent:
                spent["jit"] = await self.jit()
            if phase == "warmup":
                self.startup = {
                    "load_weight": spent["load_weight"],
                    "kv_cache_allocation": spent["kv_cache_allocation"],
                    "scheduler_e2e": time.perf_counter() - scheduler_tic,
                    "tokenizer_e2e": time.perf_counter() - _LAUNCHED,
                    "cuda_graph": {family: spent.get(f"cuda_graph:{family}", 0.0) for family in CUDA_GRAPH_FAMILIES},
                }
                if "jit" in spent:
                    self.startup["jit"] = spent["jit"]
            tic = time.perf_counter()
            if self.cfg.startup_delay * share > 0:
                await asyncio.sleep(self.cfg.startup_delay * share)
            spent[phase] = time.perf_counter() - tic
        self.started.set()

    async def jit(self) -> float:
        """The JIT/autotune phase (standin_jit.py): short when the cache holds this start's kernels at
        their absolute paths, long otherwise, and then the kernels are written. Its seconds."""
        import standin_jit  # noqa: PLC0415 (only with STANDIN_JIT_COLD_S: existing drills need no new file)

        cfg = self.cfg
        key = standin_jit.jit_key(cfg.version, cfg.flags)
        warm = standin_jit.is_warm(cfg.cache_dir, key)
        tic = time.perf_counter()
        await asyncio.sleep(cfg.jit_warm_s if warm else cfg.jit_cold_s)
        if not warm and cfg.cache_dir:
            standin_jit.write_cold(cfg.cache_dir, key)
        seconds = time.perf_counter() - tic
        print(f"STANDIN_JIT {'warm' if warm else 'cold'} {seconds:.3f} {key}", flush=True)
        return seconds

    def pick_fault(self) -> str:
        cfg = self.cfg
        self.requests_seen += 1
        n = self.requests_seen - cfg.fault_after
        if not cfg.fault or n <= 0 or n % cfg.fault_every != 0:
            return ""
        if cfg.fault_count and self.faults_applied >= cfg.fault_count:
            return ""
        self.faults_applied += 1
        return cfg.fault

    def submit(self, req: Request) -> None:
        self.prompt_tokens_total += req.prompt_tokens
        self.waiting.append(req)
        self.wake.set()

    async def run(self) -> None:
        next_t = 0.0
        while True:
            if not self.ready():
                await self.started.wait()
                continue
            self._admit()
            if not self.running:
                self.wake.clear()
                await self.wake.wait()
                next_t = time.monotonic()
                continue
            n = self._burst()
            now = time.monotonic()
            self._record(now)
            next_t = await self._pace(next_t, n, now)

    def _admit(self) -> None:
        """Move waiting requests into the running batch, as many as ``max_running`` leaves room for."""
        if self.waiting:
            cfg = self.cfg
            room = len(self.waiting) if cfg.max_running <= 0 else max(0, cfg.max_running - len(self.running))
            if room:
                self.running.extend(self.waiting[:room])
                del self.waiting[:room]

    def _burst(self) -> int:
        """One step when paced by a rate, else up to ``burst_steps`` (for 50 ms at most), then flush
        what the steps wrote. Returns the tokens generated."""
        cfg = self.cfg
        n = 0
        burst_end = time.monotonic() + 0.05
        for _step in range(1 if cfg.rate > 0 else cfg.burst_steps):
            n += self.step()
            if not self.running or time.monotonic() > burst_end:
                break
        for proto in self.dirty:
            proto.flush()
        self.dirty.clear()
        return n

    def _record(self, now: float) -> None:
        """Remember the token count at ``now`` for gen_throughput (a bounded list)."""
        self.recent.append((now, self.generation_tokens_total))
        if len(self.recent) > 4096:
            del self.recent[:2048]

    async def _pace(self, next_t: float, n: int, now: float) -> float:
        """Sleep so that the engine makes ``rate`` tokens/s (without a rate: only yield). Returns the
        time the next step is due."""
        rate = self.cfg.rate
        if rate <= 0:
            await asyncio.sleep(0)
            return next_t
        step_s = n / rate
        if self.cfg.request_rate > 0:
            step_s = max(step_s, 1.0 / self.cfg.request_rate)  # one token per running request per step
        next_t += step_s
        delay = next_t - now
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            if delay < -1.0:  # too far behind (stalled): restart the schedule
                next_t = now
            await asyncio.sleep(0)
        return next_t

    def step(self) -> int:
        """One decode step: every running request gets one token. Returns the batch size."""
        running = self.running
        n = len(running)
        interval = self.cfg.stream_interval
        finished = False
        for req in running:
            if req.done:
                finished = True
                continue
            req.k += 1
            if req.k >= req.stop_at:
                req.done = True
                finished = True
                req.proto.finish(req)
            elif req.stream and (req.k == 1 or req.k % interval == 0):
                req.proto.progress(req)
        self.generation_tokens_total += n
        if finished:
            self.running = [r for r in running if not r.done]
        return n

    def gen_throughput(self) -> float:
        now = time.monotonic()
        window = [(t, c) for t, c in self.recent if now - t <= 5.0]
        if len(window) < 2 or window[-1][0] <= window[0][0]:
            return 0.0
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


class HTTPProtocol(asyncio.Protocol):
    """HTTP/1.1 with keep-alive; one request at a time per connection."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.closed = False
        self.current: Request | None = None
        self.keep_alive = True
        self.pending: list[bytes] = []

    # -- connection -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.conns.discard(self)
        if self.current is not None:
            self.current.done = True
            self.current = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._try_request()

    def _try_request(self) -> None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > 65536:
                self._respond(400, {"error": {"message": "request head too large"}}, close=True)
            return
        head = bytes(self.buf[:end]).decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            self._respond(400, {"error": {"message": f"bad request line {lines[0]!r}"}}, close=True)
            return
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _sep, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._respond(400, {"error": {"message": "bad content-length"}}, close=True)
            return
        if headers.get("transfer-encoding", "").lower() == "chunked":
            self._respond(400, {"error": {"message": "chunked request bodies are not supported"}}, close=True)
            return
        if len(self.buf) < end + 4 + length:
            return
        body = bytes(self.buf[end + 4 : end + 4 + length])
        del self.buf[: end + 4 + length]
        conn = headers.get("connection", "").lower()
        self.keep_alive = not (conn == "close" or (version == "HTTP/1.0" and conn != "keep-alive"))
        self.busy = True
        path = target.split("?", 1)[0]
        try:
            self.server.route(self, method, path, headers, body)
        except Exception as exc:  # a stand-in bug must show up as a 500, not kill the server
            self._respond(500, {"error": {"message": f"stand-in internal error: {exc!r}"}})

    def flush(self) -> None:
        """Write the events buffered during this engine burst in one send."""
        if self.pending:
            data = b"".join(self.pending) if len(self.pending) > 1 else self.pending[0]
            self.pending.clear()
            if self.transport is not None and not self.closed:
                self.transport.write(data)

    def _write(self, data: bytes) -> None:
        self.flush()
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def _done(self, close: bool = False) -> None:
        self.busy = False
        self.current = None
        if close or not self.keep_alive:
            self.flush()
            if self.transport is not None:
                self.transport.close()
            return
        if self.buf:
            self._try_request()

    # -- responses ------------------------------------------------------------------------
    def _respond(self, status: int, body: object, close: bool = False, ctype: str = "application/json") -> None:
        payload = body if isinstance(body, bytes) else _json_bytes(body)
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
            f"content-type: {ctype}\r\ncontent-length: {len(payload)}\r\n"
            f"{'connection: close' if close or not self.keep_alive else 'connection: keep-alive'}\r\n\r\n"
        )
        self._write(head.encode() + payload)
        self._done(close)

    def _start_stream(self) -> None:
        self._write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n"
            + (b"connection: keep-alive\r\n\r\n" if self.keep_alive else b"connection: close\r\n\r\n")
        )

    def _chunk(self, payload: bytes) -> None:
        if not self.closed:
            self.pending += (b"%x\r\n" % len(payload), payload, b"\r\n")  # one copy, in flush's join
            self.server.engine.dirty.add(self)

    def _end_stream(self) -> None:
        self._chunk(b"data: [DONE]\n\n")
        self.pending.append(b"0\r\n\r\n")
        self._done()

    # -- generation callbacks from the engine ---------------------------------------------
    def progress(self, req: Request) -> None:
        if self.closed:
            req.done = True
            return
        assert self.transport is not None
        if req.fault in _MIDSTREAM_FAULTS and req.k >= 3:
            self._apply_midstream_fault(req)
            return
        if req.fault in _ONE_EVENT_FAULTS and req.k == 3:
            self._chunk(self._bad_event(req))
        if self.transport.get_write_buffer_size() > _COALESCE_HIGH_WATER:
            return  # slow client: coalesce, the next event carries these tokens
        self._chunk(self._event(req, final=False))
        req.sent_k = req.k

    def finish(self, req: Request) -> None:
        if self.closed:
            return
        if req.fault in _MIDSTREAM_FAULTS:
            self._apply_midstream_fault(req)
            return
        if not req.stream:
            self._respond(200, self._final_object(req))
            return
        self._chunk(self._event(req, final=True))
        if req.fault == "after_done" and req.stream:
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(self._event(req, final=True))
            self._end_stream()
            return
        if req.api == "openai" and req.include_usage:
            usage = {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + req.k}
            usage["completion_tokens"] = req.k
            chunk = {
                "id": req.completion_id,
                "object": "text_completion",
                "created": req.created,
                "model": self.server.cfg.served_model_name,
                "choices": [],
                "usage": usage,
            }
            self._chunk(b"data: " + _json_bytes(chunk) + b"\n\n")
        self._end_stream()

    def _apply_midstream_fault(self, req: Request) -> None:
        req.done = True
        fault = req.fault
        if fault == "drop_connection":
            assert self.transport is not None
            self.transport.abort()
            return
        if not req.stream:
            self._respond(500, {"error": {"message": f"injected fault {fault}"}})
            return
        if fault == "endless_stream":
            asyncio.get_running_loop().create_task(self._endless(req))
            return
        if fault == "malformed_sse":
            self._chunk(b'data: {"text": "w1 w2", "meta_info": {"completion_tokens": \n\n')
        else:
            msg = "stand-in injected fault: CUDA error: an illegal memory access was encountered"
            self._chunk(b"data: " + _json_bytes({"error": {"message": msg}}) + b"\n\n")
        self._end_stream()

    def _bad_event(self, req: Request) -> bytes:
        """The one bad event of a one-event fault (the stream goes on normally after it)."""
        if req.fault == "malformed_middle":  # a quote missing after the text; the count is there
            return b'data: {"text":" w0 w1 w2,"meta_info":{"completion_tokens":%d}}\n\n' % req.k
        if req.fault == "huge_event":
            return b'data: {"text":"' + b"x" * self.server.cfg.huge_event_bytes + b'"}\n\n'
        counts = {
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.k,
            "total_tokens": req.prompt_tokens + req.k,
        }
        err = {"error": {"message": "stand-in injected fault: error event with counts"}}
        err.update({"usage": counts} if req.api == "openai" else {"meta_info": counts})
        return b"data: " + _json_bytes(err) + b"\n\n"

    async def _endless(self, req: Request) -> None:
        """Events that repeat the same count, every 50 ms, until the client goes away."""
        event = self._event(req, final=False)
        while not self.closed:
            self._chunk(event)
            self.flush()
            await asyncio.sleep(0.05)

    async def trickle(self, data: bytes) -> None:
        """Write ``data`` one byte per STANDIN_TRICKLE_S, then keep the connection open and silent."""
        for i in range(len(data)):
            if self.closed or self.transport is None:
                return
            self.transport.write(data[i : i + 1])
            await asyncio.sleep(self.server.cfg.trickle_s)
        while not self.closed:
            await asyncio.sleep(self.server.cfg.trickle_s)

    def _finish_reason(self, req: Request) -> dict[str, object]:
        if req.fault == "aborted":
            return {"type": "abort", "message": "Abort request"}
        if req.k < req.max_new and req.fault != "short_tokens":
            return {"type": "stop", "matched": 2}
        return {"type": "length", "length": req.k}

    def _event(self, req: Request, final: bool) -> bytes:
        cfg = self.server.cfg
        if req.api == "openai":
            chunk: dict[str, object] = {
                "id": req.completion_id,
                "object": "text_completion",
                "created": req.created,
                "model": cfg.served_model_name,
                "choices": [
                    {
                        "index": 0,
                        "text": _text(req.sent_k, req.k),
                        "logprobs": None,
                        "finish_reason": (self._finish_reason(req)["type"] if final else None),
                        "matched_stop": None,
                    }
                ],
                "usage": None,
            }
            if req.continuous_usage:
                chunk["usage"] = {
                    "prompt_tokens": req.prompt_tokens,
                    "completion_tokens": req.k,
                    "total_tokens": req.prompt_tokens + req.k,
                }
            return b"data: " + _json_bytes(chunk) + b"\n\n"
        start = req.sent_k if cfg.incremental else 0
        text, ids = _SEQ.slices(start, req.k)
        if final:
            meta = _json_bytes(self._final_meta(req))
        else:
            meta = b'{"id":"%b","finish_reason":null,"prompt_tokens":%d,"completion_tokens":%d,"cached_tokens":0}' % (
                req.rid.encode(),
                req.prompt_tokens,
                req.k,
            )
        return b'data: {"text":"%b","output_ids":[%b],"meta_info":%b}\n\n' % (text, ids, meta)

    def _final_object(self, req: Request) -> dict[str, object]:
        if req.api == "openai":
            return {
                "id": req.completion_id,
                "object": "text_completion",
                "created": req.created,
                "model": self.server.cfg.served_model_name,
                "choices": [
                    {
                        "index": 0,
                        "text": _text(0, req.k),
                        "logprobs": None,
                        "finish_reason": self._finish_reason(req)["type"],
                        "matched_stop": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": req.prompt_tokens,
                    "completion_tokens": req.k,
                    "total_tokens": req.prompt_tokens + req.k,
                },
            }
        return {
            "text": _text(0, req.k),
            "output_ids": _ids(0, req.k),
            "meta_info": self._final_meta(req),
        }

    def _final_meta(self, req) -> dict:
        """SGLang's meta_info of a finished request (the final event, or the non-streamed body)."""
        return {
            "id": req.rid,
            "finish_reason": self._finish_reason(req),
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.k,
            "cached_tokens": 0,
            "e2e_latency": round(time.time() - req.start, 6),
        }


class Server:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.engine = Engine(cfg)
        self.conns: set[HTTPProtocol] = set()

    def server_info(self) -> dict[str, object]:
        info: dict[str, object] = dict(self.cfg.flags)
        info.pop("port_file", None)
        if "api_key" in info:
            info["api_key"] = "***"
        info.update(
            {
                "version": self.cfg.version,
                "model_path": self.cfg.model_path,
                "host": self.cfg.host,
                "port": self.cfg.port,
            }
        )
        return info

    def metrics(self) -> bytes:
        e = self.engine
        lines = [
            "# HELP sglang:generation_tokens_total Number of generation tokens processed.",
            "# TYPE sglang:generation_tokens_total counter",
            f'sglang:generation_tokens_total{{model_name="{self.cfg.served_model_name}"}} '
            f"{float(e.generation_tokens_total)}",
            "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE sglang:prompt_tokens_total counter",
            f'sglang:prompt_tokens_total{{model_name="{self.cfg.served_model_name}"}} {float(e.prompt_tokens_total)}',
            "# HELP sglang:gen_throughput The generation throughput (token/s).",
            "# TYPE sglang:gen_throughput gauge",
            f'sglang:gen_throughput{{model_name="{self.cfg.served_model_name}"}} {e.gen_throughput():.3f}',
            "# HELP sglang:num_running_reqs The number of running requests.",
            "# TYPE sglang:num_running_reqs gauge",
            f'sglang:num_running_reqs{{model_name="{self.cfg.served_model_name}"}} {float(len(e.running))}',
            "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.",
            "# TYPE sglang:num_queue_reqs gauge",
            f'sglang:num_queue_reqs{{model_name="{self.cfg.served_model_name}"}} {float(len(e.waiting))}',
        ]
        lines += self.startup_metrics()
        return ("\n".join(lines) + "\n").encode()

    def startup_metrics(self) -> list[str]:
        """The two startup gauges as prometheus_client writes them: HELP and TYPE always, samples once set."""
        startup = self.engine.startup
        common = f'model_name="{_label_value(self.cfg.served_model_name)}",engine_type="unified"'
        lines = [
            "# HELP sglang:startup_time_seconds Engine startup duration by phase in seconds.",
            "# TYPE sglang:startup_time_seconds gauge",
        ]
        if startup is not None:
            lines += [
                f'sglang:startup_time_seconds{{{common},phase="{phase}"}} {float(startup[phase])!r}'  # type: ignore[arg-type]
                for phase in ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e", "jit")
                if phase in startup
            ]
        lines += [
            "# HELP sglang:startup_cuda_graph_time_seconds CUDA graph capture duration by phase in seconds.",
            "# TYPE sglang:startup_cuda_graph_time_seconds gauge",
        ]
        if startup is not None:
            graphs: dict[str, float] = startup["cuda_graph"]  # type: ignore[assignment]
            lines += [
                f'sglang:startup_cuda_graph_time_seconds{{{common},phase="{family}"}} {float(graphs[family])!r}'
                for family in CUDA_GRAPH_FAMILIES
            ]
        return lines

    def route(self, proto: HTTPProtocol, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        if not self._authorized(path, headers):
            proto._respond(401, {"error": "Unauthorized"})
            return
        if method == "GET":
            self._get(proto, path)
            return
        if method == "POST" and path in ("/generate", "/v1/completions"):
            self._generate(proto, path, body)
            return
        if method == "POST" and path == "/abort_request":
            self._abort(proto, body)
            return
        proto._respond(404 if method in ("POST", "PUT", "DELETE") else 405, {"detail": "Not Found"})

    def _authorized(self, path: str, headers: dict[str, str]) -> bool:
        """Without ``--api-key`` everything is; with it, health, readiness and metrics are exempt."""
        key = self.cfg.api_key
        exempt = path.startswith("/health") or path in ("/ready", "/metrics")
        return not key or exempt or headers.get("authorization", "") == f"Bearer {key}"

    def _get(self, proto: HTTPProtocol, path: str) -> None:
        """The GET endpoints; readiness answers 503 until the startup delay is over."""
        cfg = self.cfg
        ready = self.engine.ready()
        if path in ("/health", "/health_generate") and cfg.health_fault:
            self._health_fault(proto)
        elif path in ("/health", "/health_generate", "/ready"):
            proto._respond(200 if ready else 503, b"", ctype="text/plain")
        elif path in ("/server_info", "/get_server_info"):
            proto._respond(200, self.server_info())
        elif path in ("/model_info", "/get_model_info"):
            proto._respond(200, self.model_info())
        elif path == "/v1/models":
            proto._respond(200, self.models())
        elif path == "/metrics" and cfg.enable_metrics:
            proto._respond(200, self.metrics(), ctype="text/plain; version=0.0.4; charset=utf-8")
        elif path in ("/generate", "/v1/completions"):
            proto._respond(405, {"detail": "Method Not Allowed"})
        else:
            proto._respond(404, {"detail": "Not Found"})

    def model_info(self) -> dict[str, object]:
        """GET /model_info: what SGLang says of the loaded model."""
        cfg = self.cfg
        return {
            "model_path": cfg.model_path,
            "tokenizer_path": cfg.flags.get("tokenizer_path", cfg.model_path),
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
        }

    def models(self) -> dict[str, object]:
        """GET /v1/models: the one served model."""
        cfg = self.cfg
        return {
            "object": "list",
            "data": [
                {
                    "id": cfg.served_model_name,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "sglang",
                    "root": cfg.model_path,
                }
            ],
        }

    def _health_fault(self, proto: HTTPProtocol) -> None:
        fault = self.cfg.health_fault
        if fault in ("401", "403"):
            proto._respond(int(fault), {"error": "Unauthorized" if fault == "401" else "Forbidden"})
        elif fault == "redirect":
            proto._write(
                b"HTTP/1.1 302 Found\r\nlocation: http://user:hunter2@elsewhere/health\r\ncontent-length: 0\r\n\r\n"
            )
            proto._done()
        else:
            head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 64\r\n\r\n"
            if fault == "trickle_head":
                asyncio.get_running_loop().create_task(proto.trickle(head))
            else:
                proto._write(head)
                asyncio.get_running_loop().create_task(proto.trickle(b"x" * 64))

    @staticmethod
    def _json_object(proto: HTTPProtocol, body: bytes, empty: bytes) -> dict | None:
        """The request body as a JSON object (``empty`` stands for an empty body), or None after
        answering 400 with the reason."""
        try:
            obj = json.loads(body or empty)
        except ValueError as exc:
            proto._respond(400, {"error": {"message": f"request body is not JSON: {exc}"}})
            return None
        if not isinstance(obj, dict):
            proto._respond(400, {"error": {"message": "request body must be a JSON object"}})
            return None
        return obj

    def _generate(self, proto: HTTPProtocol, path: str, body: bytes) -> None:
        obj = self._json_object(proto, body, b"null")
        if obj is None:
            return
        api = "openai" if path == "/v1/completions" else "native"
        try:
            prompt_tokens, max_new, ignore_eos = self._shape(api, obj)
        except ValueError as exc:
            proto._respond(400, {"error": {"message": str(exc)}})
            return
        eng = self.engine
        fault = eng.pick_fault()
        if fault == "http500":
            proto._respond(500, {"error": {"message": "stand-in injected fault: internal server error"}})
            return
        if fault in _TRICKLE_FAULTS:
            head = (
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            event = b'data: {"text":" w0","output_ids":[1000],"meta_info":{"completion_tokens":1}}\n\n'
            if fault == "trickle_head":
                asyncio.get_running_loop().create_task(proto.trickle(head))
            else:
                proto._write(head)
                asyncio.get_running_loop().create_task(proto.trickle((b"%x\r\n%b\r\n" % (len(event), event)) * 1000))
            return
        eng.next_rid += 1
        stream = bool(obj.get("stream", False))
        req = Request(proto, f"{eng.next_rid:032x}", api, prompt_tokens=prompt_tokens, max_new=max_new, stream=stream)
        req.fault = fault
        if fault == "short_tokens":
            req.stop_at = max(1, max_new // 2)
        elif not ignore_eos and self.cfg.eos_after > 0:
            req.stop_at = min(max_new, self.cfg.eos_after)
        if api == "openai":
            req.completion_id = f"cmpl-{req.rid}"
            opts = obj.get("stream_options") or {}
            if isinstance(opts, dict):
                req.include_usage = bool(opts.get("include_usage"))
                req.continuous_usage = bool(opts.get("continuous_usage_stats"))
        proto.current = req
        if stream:
            proto._start_stream()
        eng.submit(req)

    def _abort(self, proto: HTTPProtocol, body: bytes) -> None:
        """POST /abort_request {"rid": ..., "abort_all": bool} (SGLang's AbortReq): the requests end at
        once, queued ones with no token, running ones after their current token, with finish_reason
        ``{"type": "abort"}``; 200 with an empty body, as SGLang answers."""
        obj = self._json_object(proto, body, b"{}")
        if obj is None:
            return
        eng = self.engine
        rid = str(obj.get("rid") or "")
        hit = [r for r in eng.running + eng.waiting if obj.get("abort_all") is True or (rid and r.rid == rid)]
        for req in hit:
            req.fault = "aborted"
            if req in eng.waiting:
                eng.waiting.remove(req)
                req.done = True
                req.proto.finish(req)
            else:
                req.stop_at = req.k + 1
        proto._respond(200, b"", ctype="text/plain")

    def _shape(self, api: str, obj: dict[str, object]) -> tuple[int, int, bool]:
        if api == "native":
            sp = obj.get("sampling_params") or {}
            if not isinstance(sp, dict):
                raise ValueError("sampling_params must be an object")
            if obj.get("input_ids") is not None:
                ids = obj["input_ids"]
                if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
                    raise ValueError("input_ids must be a list of integers (batched requests are not supported)")
                prompt = len(ids)
            elif isinstance(obj.get("text"), str):
                prompt = max(1, len(str(obj["text"]).split()))
            else:
                raise ValueError("Either text or input_ids should be provided.")
            max_new = sp.get("max_new_tokens", 128)
            ignore_eos = sp.get("ignore_eos", False)
        else:
            prompt_obj = obj.get("prompt")
            if isinstance(prompt_obj, str):
                prompt = max(1, len(prompt_obj.split()))
            elif isinstance(prompt_obj, list) and prompt_obj and all(isinstance(i, int) for i in prompt_obj):
                prompt = len(prompt_obj)
            else:
                raise ValueError("prompt must be a string or a list of token ids")
            max_new = obj.get("max_tokens", 16)
            ignore_eos = obj.get("ignore_eos", False)
        if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, got {max_new!r}")
        return prompt, max_new, bool(ignore_eos)


async def serve(cfg: Config) -> int:
    loop = asyncio.get_running_loop()
    server = Server(cfg)
    srv = await loop.create_server(lambda: HTTPProtocol(server), cfg.host, cfg.port, backlog=4096, reuse_address=True)
    port = srv.sockets[0].getsockname()[1]
    cfg.port = port
    port_file = cfg.flags.get("port_file")
    if isinstance(port_file, str):
        tmp = port_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{port}\n")
        os.replace(tmp, port_file)
    print(f"STANDIN_LISTENING {cfg.host} {port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    start_task = asyncio.create_task(server.engine.start())
    engine_task = asyncio.create_task(server.engine.run())
    await stop.wait()
    srv.close()
    for conn in list(server.conns):
        if conn.transport is not None:
            conn.transport.close()
    for task in (start_task, engine_task):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    print("STANDIN_STOPPED", flush=True)
    return 0


def server_args_line(flags: dict[str, object], now: float | None = None) -> str:
    """SGLang's start-up dump of its arguments (see the header), for these flags."""
    resolved: dict[str, object] = {}
    for key, value in flags.items():
        resolved[key] = int(value) if isinstance(value, str) and value.isdigit() else value
    resolved.setdefault("api_key", None)
    resolved.setdefault("admin_api_key", None)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    return f"[{stamp}] server_args={resolved}"


def main(argv: list[str]) -> int:
    cfg = Config(parse_flags(merge_config(argv)))
    print(server_args_line(cfg.flags), file=sys.stderr, flush=True)
    if cfg.surface["mode"] == "crash":
        print(f"sglang_api stand-in (surface): {cfg.surface['message']}", file=sys.stderr, flush=True)
        return 1
    if cfg.surface["mode"] == "oom":
        time.sleep(float(cfg.surface["after_s"]))  # type: ignore[arg-type]
        print(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. "
            f"(sglang_api stand-in (surface): {cfg.surface['message']})",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return asyncio.run(serve(cfg))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
