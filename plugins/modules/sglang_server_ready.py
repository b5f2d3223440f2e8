#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_ready
short_description: Wait until an SGLang server unit answers its readiness endpoint, failing fast when the unit dies
version_added: "0.1.0"
description:
  - Polls O(url) until it answers HTTP 200, for at most O(timeout_s) seconds (the deadline holds, since each
    probe's own timeout never reaches past it).
  - Before every probe it reads the systemd unit O(service) (C(systemctl show)). When the unit is
    C(failed), has stopped, or restarted more than O(max_restarts) times since the wait began, the wait
    ends at once, long before the deadline.
  - On failure the result carries the verdict, the unit's state and the last O(journal_lines) lines of
    its journal since the start the wait is about (the unit's C(InactiveExitTimestamp) when the wait began),
    with every form of every value of O(redact) (as written, escaped, percent-encoded) replaced by C(********).
    Lines of an earlier run of the unit stay out.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  service:
    description: Name of the systemd unit (with or without C(.service)).
    type: str
    required: true
  url:
    description: Readiness URL, for example C(http://127.0.0.1:30000/health_generate).
    type: str
    required: true
  timeout_s:
    description: Deadline of the whole wait, in seconds.
    type: int
    required: true
  poll_s:
    description: Seconds between probes.
    type: int
    default: 15
  max_restarts:
    description: Automatic restarts of the unit tolerated during the wait; one more ends it.
    type: int
    default: 3
  journal_lines:
    description: Journal lines returned when the wait fails.
    type: int
    default: 50
  metrics_url:
    description:
      - The server's C(/metrics) URL, read once after the server is ready for the start's phases
        (C(sglang:startup_time_seconds) and C(sglang:startup_cuda_graph_time_seconds) by C(phase)).
      - Set it only for a start the caller made (the role does, after its restart), since the phases are those of
        the unit's current start, and C(startup.ready_s) runs from that start.
      - Empty (the default) reads nothing. A C(/metrics) that does not answer, or answers garbage, never
        fails the wait; C(startup.problems) says why nothing (or not everything) was read.
    type: str
    default: ""
  redact:
    description: Secrets (for example the API key) to blank out of the journal lines returned.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Read-only; in check mode it returns at once without waiting.
notes:
  - A probe that gets no answer, or an answer other than 200, counts as still starting.
"""

EXAMPLES = r"""
- name: Wait for the server (JIT compile and autotune can take 10+ minutes)
  gpufleet.sglang.sglang_server_ready:
    service: sglang-server
    url: http://127.0.0.1:30000/health_generate
    timeout_s: 1800
    poll_s: 15
    max_restarts: 3
"""

RETURN = r"""
ready:
  description: Whether the endpoint answered 200 before the deadline.
  returned: always
  type: bool
verdict:
  description: C(ready), C(timeout), C(failed), C(stopped) or C(crashloop) (C(skipped) in check mode).
  returned: always
  type: str
  sample: crashloop
reason:
  description: One line saying why the wait ended.
  returned: always
  type: str
elapsed_s:
  description: Seconds the wait took.
  returned: always
  type: float
http_status:
  description: Status of the last probe (null when nothing answered).
  returned: always
  type: int
restarts:
  description: Automatic restarts of the unit during the wait.
  returned: always
  type: int
unit:
  description: The unit's last C(systemctl show) properties (ActiveState, SubState, Result, NRestarts, ...).
  returned: always
  type: dict
startup:
  description:
    - The start's phases from O(metrics_url) (docs/monitoring.md, "Cold start"), seconds by phase.
    - C(phases) holds C(load_weight), C(kv_cache_allocation), C(scheduler_e2e), C(tokenizer_e2e) as SGLang
      reports them; C(cuda_graph) the capture per family; C(problems) what was not read and why.
    - C(ready_s) (present when phases were read) is the time to ready of the unit's current start, from that
      start (systemd's C(InactiveExitTimestampMonotonic) when the wait began) to the 200 the wait got.
  returned: when the server is ready and O(metrics_url) is set
  type: dict
  sample: {"phases": {"load_weight": 41.2}, "cuda_graph": {"decode": 12.5}, "problems": [], "ready_s": 312.4}
journal:
  description: The last O(journal_lines) journal lines of the unit since the start the wait is about, secrets redacted.
  returned: when the wait failed
  type: list
  elements: str
"""

import time
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_ready import (
    UNIT_PROPERTIES,
    journal_argv,
    journal_lines,
    parse_show,
    probe_timeout,
    restarts,
    time_to_ready,
    unit_verdict,
    wait_options,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.startup_metrics import (
    MAX_TEXT_BYTES,
    not_read,
    parse_startup,
)


def _show(module: AnsibleModule, systemctl: str, service: str) -> dict[str, str]:
    args = [systemctl, "show", "--no-pager", *(f"--property={p}" for p in UNIT_PROPERTIES), service]
    rc, out, err = module.run_command(args)
    if rc != 0:
        module.fail_json(msg=f"sglang_server_ready: systemctl show {service} failed (rc {rc}): {err.strip()}")
    return parse_show(out)


def _probe(url: str, timeout: float) -> int | None:
    try:
        response = open_url(url, method="GET", timeout=timeout, validate_certs=False, follow_redirects="none")
        return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except Exception:  # connection refused, reset, timeout: not up yet
        return None


def _startup(url: str, ready_s: float) -> dict:
    """``{"startup": phases}`` from ``url`` (/metrics), read once, with ``ready_s``, or {} when ``url`` is
    empty; a failure to read is a problem in it, never an error."""
    if not url:
        return {}
    try:
        response = open_url(url, method="GET", timeout=10, validate_certs=False, follow_redirects="none")
        data = response.read(MAX_TEXT_BYTES + 1)
    except urllib.error.HTTPError as exc:
        return {"startup": not_read(f"GET {url} answered {exc.code}")}
    except Exception as exc:  # refused, reset, timeout, bad URL: the wait is over, the phases unknown
        return {"startup": not_read(f"GET {url} failed ({type(exc).__name__})")}
    if len(data) > MAX_TEXT_BYTES:
        return {"startup": not_read(f"GET {url} sent more than {MAX_TEXT_BYTES} bytes")}
    return {"startup": dict(parse_startup(data.decode("utf-8", errors="replace")), ready_s=ready_s)}


ARGUMENT_SPEC = {
    "service": {"type": "str", "required": True},
    **wait_options(timeout_s=None, max_restarts=3, journal_lines=50),
    "metrics_url": {"type": "str", "default": ""},
    "redact": {"type": "list", "elements": "str", "default": [], "no_log": True},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    for name in ("timeout_s", "poll_s"):
        if p[name] <= 0:
            module.fail_json(msg=f"sglang_server_ready: {name} must be > 0, got {p[name]}")
    for name in ("max_restarts", "journal_lines"):
        if p[name] < 0:
            module.fail_json(msg=f"sglang_server_ready: {name} must be >= 0, got {p[name]}")
    if not p["url"].startswith(("http://", "https://")):
        module.fail_json(msg=f"sglang_server_ready: url must start with http:// or https://, got {p['url']!r}")
    result: dict = {"changed": False, "ready": False, "http_status": None, "restarts": 0, "unit": {}}
    if module.check_mode:
        module.exit_json(verdict="skipped", reason="check mode: not waiting", elapsed_s=0.0, **result)

    systemctl = module.get_bin_path("systemctl", required=True)
    start = time.monotonic()
    deadline = start + p["timeout_s"]
    props = _show(module, systemctl, p["service"])
    baseline = restarts(props)
    activation = props.get("InactiveExitTimestamp", "")
    started_us = props.get("InactiveExitTimestampMonotonic", "")
    verdict, reason = "timeout", ""
    while True:
        props = _show(module, systemctl, p["service"])
        result["unit"] = props
        result["restarts"] = max(0, restarts(props) - baseline)
        dead = unit_verdict(props, baseline, p["max_restarts"])
        if dead:
            verdict, reason = dead
            break
        status = _probe(p["url"], probe_timeout(deadline - time.monotonic()))
        result["http_status"] = status
        if status == 200:
            verdict, reason = "ready", f"{p['url']} answered 200"
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            reason = f"{p['url']} did not answer 200 within {p['timeout_s']} s (last answer: {status or 'none'})"
            break
        time.sleep(min(p["poll_s"], remaining))
    result.update(verdict=verdict, reason=reason, elapsed_s=round(time.monotonic() - start, 1))
    if verdict == "ready":
        result["ready"] = True
        ready_s = time_to_ready(started_us, time.monotonic(), result["elapsed_s"])
        result.update(_startup(p["metrics_url"], ready_s))
        module.exit_json(**result)
    journal_bin = module.get_bin_path("journalctl")
    result["journal"] = []
    if journal_bin and p["journal_lines"] > 0:
        rc, out, err = module.run_command(journal_argv(journal_bin, p["service"], p["journal_lines"], activation))
        result["journal"] = journal_lines(rc, out, err, p["redact"])
    module.fail_json(msg=f"sglang_server_ready: {p['service']}: {reason} after {result['elapsed_s']} s", **result)


if __name__ == "__main__":
    main()
