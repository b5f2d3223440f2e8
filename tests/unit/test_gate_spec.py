# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate's option defaults are written once (gate_spec) and GateParams, the module and the
action plugin all read them from there; the readiness path is an option."""

from __future__ import annotations

import dataclasses
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import runner as gr
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import spec as gate_spec
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import shape_of
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.spec import CONTROLLER_ARGUMENT_SPEC
from ansible_collections.gpufleet.sglang.plugins.modules import throughput_gate


def test_gate_params_has_one_field_per_module_option():
    fields = [f.name for f in dataclasses.fields(gr.GateParams)]
    assert fields == list(gate_spec.GATE_ARGUMENT_SPEC)


def test_gate_params_defaults_are_what_the_module_validates_an_empty_task_to():
    checked = ArgumentSpecValidator(gate_spec.GATE_ARGUMENT_SPEC).validate({})
    assert not checked.error_messages
    assert dataclasses.asdict(gr.GateParams()) == checked.validated_parameters
    for name, value in dataclasses.asdict(gr.GateParams()).items():
        assert type(value) is type(checked.validated_parameters[name]), name  # 1800.0, not 1800


def test_gate_params_default_list_is_not_shared():
    one = gr.GateParams()
    one.baseline.append(1.0)
    assert gr.GateParams().baseline == []
    assert gate_spec.GATE_ARGUMENT_SPEC["baseline"]["default"] == []


def test_the_module_uses_the_one_spec():
    assert throughput_gate.ARGUMENT_SPEC is gate_spec.ARGUMENT_SPEC
    assert set(gate_spec.ARGUMENT_SPEC) == set(gate_spec.GATE_ARGUMENT_SPEC) | set(CONTROLLER_ARGUMENT_SPEC)


def test_with_defaults_fills_what_the_task_leaves_out():
    opts = gate_spec.with_defaults({"concurrency": 8, "max_invalid_trials": None})
    assert opts["concurrency"] == 8
    assert opts["trials"] == 5
    assert opts["design"] == "sequential"
    assert opts["max_invalid_trials"] is None
    # a task that leaves the shape to the module stores the same shape as one that states the defaults
    stated = {"api": "native", "concurrency": 64, "requests_per_trial": 256, "input_len": 1024, "output_len": 256}
    assert shape_of(gate_spec.with_defaults({})) == shape_of(stated)


class _Recorder(BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        status = 200 if self.path in ("/base/ready", "/base/server_info") else 404
        body = b'{"version": "0.5.23"}' if self.path.endswith("server_info") else b""
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


def test_wait_ready_polls_the_ready_path():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/base"
        info = gr.wait_ready(gr.GateParams(url=url, ready_path="/ready", ready_timeout=5))
        assert info["version"] == "0.5.23"
        assert _Recorder.paths[0] == "/base/ready"
        assert "/base/health_generate" not in _Recorder.paths
        assert gr.plan(gr.GateParams(url=url, ready_path="/ready"))["ready_check"].startswith(f"GET {url}/ready ")
        assert gr.plan(gr.GateParams(url=url))["ready_check"].startswith(f"GET {url}/health_generate ")
    finally:
        server.shutdown()
        server.server_close()
