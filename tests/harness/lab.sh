#!/usr/bin/env bash
# The simulated lab of inventories/local on this machine:
#   lab-pve1     a privileged Podman systemd container (host cgroup namespace) standing in for a
#                Proxmox VE host: sshd published on 127.0.0.1:2222, real LXC, the pct
#                stand-in (tests/standins/pct/pct) as /usr/sbin/pct; the NVIDIA kernel module,
#                apt repository and nvidia-smi are stand-ins (tests/standins/)
#   CT 101..103  the LXC guests that proxmox_lxc_gpu creates on lab-pve1 (inventory hosts
#                lab-sglang1..3, SGLang servers on 127.0.0.1:30001..30003), reached with
#                gpufleet.sglang.pct_ssh: OpenSSH to lab-pve1 (one shared connection), then
#                `pct exec <vmid> -- ...`, exactly as inventories/lab reaches its containers
#   CT 100       a plain LXC guest without GPUs that this script creates (as an admin runs
#                `pct create`), inventory host lab-gateway1: the smg gateway on 127.0.0.1:8080
#                (role sglang_gateway) in front of the three nodes
# The guests share lab-pve1's network namespace (lxc.net.0.type = none).
# lab-pve1 comes from pve-standin.sh: the controller's SSH key in .cache/lab/ssh/, lab-pve1's host
# keys read from the container itself into ~/.ssh/known_hosts (where both OpenSSH and paramiko
# look), replacing any old entry for [127.0.0.1]:2222, so host key checking stays on.
# usage: lab.sh up | converge [ansible-playbook args] | upgrade VERSION [ansible-playbook args]
#               | fault [lab-sglangN] | down | status
#   upgrade VERSION   rolling upgrade of the three nodes to SGLang VERSION (a wheel of the Makefile's
#                     SGLANG_WHEELS) through the gateway (playbooks/sglang.yml), under open-loop
#                     traffic through the gateway (tests/tools/traffic.py in lab-pve1) at LAB_LOAD_FRACTION
#                     (default 0.6) of the fleet's capacity, probed first from the nodes' /metrics, with
#                     OpenAI streams of LAB_TOKEN_MIX tokens (default 4000,8000,12000), the gateway's workers
#                     sampled every 0.5 s (extensions/molecule/fleet/watch.py in lab-pve1); prints the figures of
#                     tests/tools/rollout_figures.py (requests sent and failed, TTFT p50/p99 before and during the
#                     rollout, each node's drain with running and queued at removal and its wait, the minimum
#                     of healthy workers against the floor nodes - max_unavailable) and the wall time; fails
#                     when a request failed, the floor was crossed or no drain waited for a running request.
#                     -e sglang_rollout_max_unavailable=N for N nodes out at once.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}
state="$repo/.cache/lab"
lab_sglang_version=0.5.12.post1
lab_ssh_port=2222
lab_hf_hub_version=2.4.0
lab_smg_version=1.13.0
lab_gateway_vmid=100
# the SGLang nodes as the gateway reaches them (inventories/local: lab-sglang1..3)
lab_node_urls=(http://127.0.0.1:30001 http://127.0.0.1:30002 http://127.0.0.1:30003)
known_hosts=$HOME/.ssh/known_hosts
# the project's toolchain (make puts it on PATH; lab.sh run by hand finds it too); LAB_VENV picks
# another one, as `make lab-newest` does with .venv-newest (docs/supported-versions.md)
lab_venv=${LAB_VENV:-$repo/.venv}
# LAB_PVE_RELEASE: lab-pve1's Debian release, pve-standin.sh's PVE_STANDIN_RELEASE (its default,
# debian12, is Proxmox VE 8; debian13 is Proxmox VE 9). The guests stay Debian 12 either way, as on
# a Proxmox VE 9 host that keeps its CTs.
if [[ -n ${LAB_PVE_RELEASE:-} ]]; then
  export PVE_STANDIN_RELEASE=$LAB_PVE_RELEASE
fi
[[ -x "$lab_venv/bin/ansible-playbook" ]] && export PATH="$lab_venv/bin:$PATH"
export ANSIBLE_CONFIG="$repo/ansible.cfg"
log() { printf '[lab] %s\n' "$*"; }

# FlashInfer's wheel (no dependencies) for SGLang VERSION at its pin in lab-standins.yml's lab_flashinfer_pins,
# which must be the pin of the sglang wheel itself (its METADATA's Requires-Dist: flashinfer_python==...)
flashinfer_wheel() {
  local version=$1 pin
  pin=$("$lab_venv/bin/python" - "$repo/tests/harness/lab-standins.yml" "$version" "$cache/wheels" <<'PY'
import glob, re, sys, zipfile
import yaml
standins, version, wheels = sys.argv[1:]
pin = str(yaml.safe_load(open(standins, encoding="utf-8"))["lab_flashinfer_pins"].get(version, ""))
if not pin:
    sys.exit(f"[lab] no FlashInfer pin for SGLang {version} in tests/harness/lab-standins.yml (lab_flashinfer_pins)")
with zipfile.ZipFile(sorted(glob.glob(f"{wheels}/sglang-{version}-*.whl"))[0]) as whl:
    meta = whl.read(f"sglang-{version}.dist-info/METADATA").decode()
own = re.search(r"^Requires-Dist: flashinfer_python(?:\[[^]]*\])?==([^\s;]+)", meta, re.M)
if not own or own.group(1) != pin:
    sys.exit(f"[lab] lab_flashinfer_pins says {pin} for SGLang {version}; its wheel pins {own.group(0) if own else 'none'}")
print(pin)
PY
  ) || return 2
  if ! ls "$cache/wheels/flashinfer_python-$pin-"*.whl >/dev/null 2>&1; then
    log "downloading the flashinfer_python==$pin wheel (no dependencies; SGLang $version pins it)"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache/wheels" "flashinfer_python==$pin"
  fi
}

up() {
  mkdir -p "$state/proc" "$cache/wheels"
  log "stand-in CUDA apt repository"
  python3 "$repo/tests/standins/nvidia_apt/build_repo.py" "$repo/.cache/standin-apt" >/dev/null
  log "LXC guest rootfs"
  bash "$repo/extensions/molecule/proxmox_lxc_gpu/files/guest-rootfs.sh" "$repo" >/dev/null
  if ! ls "$cache/wheels/sglang-$lab_sglang_version-"*.whl >/dev/null 2>&1; then
    log "downloading the sglang==$lab_sglang_version wheel (no dependencies)"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache/wheels" "sglang==$lab_sglang_version"
  fi
  flashinfer_wheel "$lab_sglang_version"
  # the uv wheel role sglang installs itself (its pin: sglang_uv_version in the role's defaults)
  uv_version=$(sed -n 's/^sglang_uv_version: "\(.*\)"$/\1/p' "$repo/roles/sglang/defaults/main.yml")
  if ! ls "$cache/wheels/uv-$uv_version-"*.whl >/dev/null 2>&1; then
    log "downloading the uv==$uv_version wheel"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache/wheels" "uv==$uv_version"
  fi

  # the smg gateway and its dependencies (CPython 3.11 as in the Debian 12 guests), as a wheelhouse
  if ! ls "$cache/wheels/smg/smg-$lab_smg_version-"*.whl >/dev/null 2>&1; then
    log "downloading smg==$lab_smg_version and its dependencies (wheels)"
    python3 -m pip download -q --only-binary=:all: --python-version 3.11 --implementation cp \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
      -d "$cache/wheels/smg" "smg==$lab_smg_version"
  fi

  # a new lab-pve1 starts without the stand-in kernel module: no /proc state from an old one
  if ! bash "$repo/tests/harness/pve-standin.sh" running lab-pve1; then
    rm -rf "${state:?}/proc" && mkdir -p "$state/proc"
  fi
  bash "$repo/tests/harness/pve-standin.sh" up lab-pve1 "$lab_ssh_port" "$state/ssh" "$known_hosts" \
    -v "$repo/.cache/standin-apt:/srv/gpufleet-standin-apt:ro" \
    -v "$state/proc:/var/lib/gpufleet-standin/proc" \
    -v "$repo/.cache/lxc/debian12-rootfs.tar:/srv/lxc/debian12-rootfs.tar:ro" \
    -v "$cache/wheels:/srv/wheels:ro"
  # huggingface_hub for the model_store role's venv on lab-pve1, as an air-gapped fleet gets it: a
  # wheelhouse for the CPython lab-pve1 itself runs (asked, not assumed: some of huggingface_hub's
  # dependencies, pyyaml for one, are compiled wheels for one CPython), one marker per Python; the
  # wheelhouse directory is mounted, so the host sees what lands in it now
  local pve_python
  pve_python=$(podman exec lab-pve1 python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [[ ! -f "$cache/wheels/hf/.complete-$lab_hf_hub_version-py$pve_python" ]]; then
    log "downloading huggingface_hub==$lab_hf_hub_version and its dependencies (wheels for CPython $pve_python)"
    python3 -m pip download -q --only-binary=:all: --python-version "$pve_python" --implementation cp \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
      --platform linux_x86_64 -d "$cache/wheels/hf" "huggingface_hub==$lab_hf_hub_version"
    touch "$cache/wheels/hf/.complete-$lab_hf_hub_version-py$pve_python"
  fi
  # the Hugging Face Hub stand-in the model_store role downloads from (a transient unit)
  if ! podman exec lab-pve1 systemctl is-active -q gpufleet-hub-standin; then
    podman exec lab-pve1 systemd-run --unit gpufleet-hub-standin --quiet \
      python3 /srv/gpufleet-standins/hf_hub.py --host 127.0.0.1 --port 8765 --size-mb 16 \
      --log /var/log/gpufleet-hub-standin.jsonl
  fi
  # the kernel log the GPU nodes' health check reads on lab-pve1 (lab-standins.yml)
  podman exec lab-pve1 touch /var/lib/gpufleet-standin/kernel.log
  # /proc/devices always exists; the stand-in kernel module adds its majors on install
  [[ -s "$state/proc/devices" ]] || podman exec lab-pve1 cp /proc/devices /var/lib/gpufleet-standin/proc/devices
  gateway_ct
  # the lab before the pct connection ran its SGLang node as a second Podman container
  podman rm -f lab-sglang1 >/dev/null 2>&1 || true
  log "lab is up: lab-pve1 (ssh root@127.0.0.1:$lab_ssh_port), the gateway's CT $lab_gateway_vmid"
}

# CT 100 for the gateway: what an admin's `pct create` does on Proxmox VE (proxmox_lxc_gpu manages
# GPU containers only): the Debian 12 guest rootfs, lab-pve1's network and resolver, the wheelhouse
gateway_ct() {
  podman exec -i lab-pve1 bash -s "$lab_gateway_vmid" <<'CT'
set -euo pipefail
vmid=$1 dir=/var/lib/lxc/$1
if [[ ! -f $dir/config ]]; then
  echo "[lab] creating CT $vmid (the gateway's container, no GPUs)"
  rm -rf "$dir/rootfs.new" && mkdir -p "$dir/rootfs.new"
  tar -xpf /srv/lxc/debian12-rootfs.tar -C "$dir/rootfs.new"
  rm -rf "$dir/rootfs" && mv "$dir/rootfs.new" "$dir/rootfs"
  printf '%s\n' \
    'lxc.include = /usr/share/lxc/config/common.conf' \
    'lxc.arch = linux64' \
    'lxc.start.auto = 1' \
    'lxc.uts.name = gateway-guest' \
    "lxc.rootfs.path = dir:$dir/rootfs" \
    'lxc.net.0.type = none' \
    'lxc.mount.entry = /etc/resolv.conf etc/resolv.conf none bind,ro,create=file 0 0' \
    'lxc.mount.entry = /srv/wheels srv/wheels none bind,ro,create=dir 0 0' > "$dir/config.new"
  mv "$dir/config.new" "$dir/config"
fi
if ! lxc-info -n "$vmid" -sH | grep -qi running; then
  lxc-start -n "$vmid"
  for _ in $(seq 1 60); do
    state=$(lxc-attach -n "$vmid" -- systemctl is-system-running 2>/dev/null || true)
    [[ $state == running || $state == degraded ]] && exit 0
    sleep 1
  done
  echo "[lab] CT $vmid: systemd did not finish booting in 60 s" >&2
  exit 1
fi
CT
}

# Each SGLang node's last start: the stand-in's jit phase, cold (compiled) or warm (from the warm cache the
# canary stored on lab-pve1, docs/warm-start.md), as its server's journal says
start_phases() {
  local node line
  # the containers are named by vmid on lab-pve1 (inventories/local/host_vars/lab-pve1.yml)
  for node in 101:lab-sglang1 102:lab-sglang2 103:lab-sglang3; do
    line=$(podman exec lab-pve1 lxc-attach -n "${node%%:*}" -- journalctl -u sglang-server -o cat --no-pager 2>/dev/null |
      grep '^STANDIN_JIT ' | tail -n 1 || true)
    echo "start ${node#*:}: ${line:-no STANDIN_JIT line in its journal}"
  done
}

converge() {
  cd "$repo"
  mkdir -p "$state"
  local start=$SECONDS rc=0
  log "ansible-playbook site.yml -i inventories/local -e @tests/harness/lab-standins.yml $*"
  log "lab-pve1: $(podman exec lab-pve1 sh -c '. /etc/os-release; echo "$PRETTY_NAME, $(python3 --version)"')"
  log "toolchain: $(command -v ansible-playbook): $(ansible-playbook --version | sed -n '1s/^ansible-playbook //p;s/^  python version = \([^ ]*\).*/Python \1/p' | paste -sd ' ')"
  ANSIBLE_FORCE_COLOR=0 ansible-playbook site.yml -i inventories/local -e @tests/harness/lab-standins.yml "$@" 2>&1 | tee "$state/last-run.log" || rc=$?
  local took=$((SECONDS - start))
  echo
  echo "================================ lab summary ================================"
  sed -n '/^PLAY RECAP/,/^$/p' "$state/last-run.log" | tail -n +2
  sed -n '/Summary of the throughput gate/,/^$/p' "$state/last-run.log" | tail -n +3 | sed 's/^ *//'
  start_phases
  # Prometheus in the gateway's CT (playbooks/monitoring.yml): every scrape target and its health,
  # once each has been scraped (a new Prometheus lists no target until it has loaded its scrape
  # config, then 'unknown' until each target's first scrape; 45 s deadline)
  podman exec lab-pve1 python3 -c "import json, time, urllib.request
deadline = time.monotonic() + 45
while True:
    targets = json.load(urllib.request.urlopen('http://127.0.0.1:9090/api/v1/targets', timeout=5))['data']['activeTargets']
    if (targets and all(t['health'] != 'unknown' for t in targets)) or time.monotonic() > deadline:
        break
    time.sleep(2)
if not targets:
    print('prometheus: no scrape target after 45 s')
for t in sorted(targets, key=lambda t: (t['labels'].get('job', ''), t['scrapeUrl'])):
    print(f\"prometheus target {t['labels'].get('job')} {t['labels'].get('node')} {t['scrapeUrl']}: {t['health']}\")" \
    2>/dev/null || echo "prometheus: no answer on the gateway's CT (127.0.0.1:9090)"
  echo "site.yml: rc=$rc, ${took} s (full log: .cache/lab/last-run.log)"
  return "$rc"
}

# Rolling upgrade through the gateway under steady traffic (see the usage above).
upgrade() {
  local version=${1:?usage: lab.sh upgrade VERSION [ansible-playbook args]}
  shift
  cd "$repo"
  mkdir -p "$state"
  ls "$cache/wheels/sglang-$version-"*.whl >/dev/null 2>&1 ||
    { log "no sglang==$version wheel in $cache/wheels (make wheels fetches the Makefile's SGLANG_WHEELS)"; return 2; }
  flashinfer_wheel "$version"
  local secrets=/var/lib/lxc/$lab_gateway_vmid/rootfs/etc/sglang-gateway/sglang-gateway.secrets.env
  local load=${LAB_LOAD_FRACTION:-0.6} mix=${LAB_TOKEN_MIX:-4000,8000,12000} tools=/usr/local/lib/gpufleet-traffic
  local node metrics=() watch_nodes=()
  for node in "${lab_node_urls[@]}"; do metrics+=(--metrics-url "$node"); watch_nodes+=(--node "$node"); done
  podman exec lab-pve1 test -s "$secrets" || { log "no gateway in the lab: run make lab first"; return 2; }
  # traffic.py checks every stream with the throughput gate's gate_sse.py, found next to it; the
  # gateway's workers are sampled by molecule/fleet's watcher (one sampler for both drills)
  podman exec lab-pve1 mkdir -p "$tools"
  podman cp "$repo/tests/tools/traffic.py" "lab-pve1:$tools/traffic.py"
  podman cp "$repo/plugins/module_utils/gate/sse.py" "lab-pve1:$tools/gate_sse.py"
  podman cp "$repo/extensions/molecule/fleet/watch.py" "lab-pve1:$tools/watch.py"
  podman exec lab-pve1 bash -c 'for u in lab-traffic lab-watch; do systemctl stop $u; systemctl reset-failed $u; done 2>/dev/null
    rm -f /run/lab-traffic.stop /run/lab-traffic.json /run/lab-watch.stop /run/lab-watch.jsonl
    echo probe > /run/lab-traffic.phase; true'
  podman exec lab-pve1 systemd-run --unit lab-watch --collect --quiet --property=EnvironmentFile="$secrets" \
    /usr/bin/python3 "$tools/watch.py" --gateway http://127.0.0.1:8080 "${watch_nodes[@]}" --out /run/lab-watch.jsonl \
    --stop-file /run/lab-watch.stop --key-env SGLANG_GATEWAY_API_KEY --every-s 0.5
  log "traffic: open loop at $load of the fleet's capacity, streams of $mix tokens, through the gateway"
  podman exec lab-pve1 systemd-run --unit lab-traffic --collect --quiet \
    --property=EnvironmentFile="$secrets" /usr/bin/python3 "$tools/traffic.py" \
    --url http://127.0.0.1:8080 --api-key-env SGLANG_GATEWAY_API_KEY --load-fraction "$load" \
    --capacity-probe-s 3 --probe-concurrency 36 "${metrics[@]}" --api openai --max-new-tokens "$mix" --stream \
    --phase-file /run/lab-traffic.phase --stop-file /run/lab-traffic.stop --summary /run/lab-traffic.json --duration-s 3600
  sleep 4
  podman exec lab-pve1 bash -c 'echo before > /run/lab-traffic.phase'
  sleep 15
  podman exec lab-pve1 bash -c 'echo rollout > /run/lab-traffic.phase'
  local start=$SECONDS rc=0 t0 t1
  t0=$(date +%s.%N)
  log "ansible-playbook playbooks/sglang.yml -i inventories/local -e @tests/harness/lab-standins.yml -e sglang_version=$version $*"
  ANSIBLE_FORCE_COLOR=0 ansible-playbook playbooks/sglang.yml -i inventories/local -e @tests/harness/lab-standins.yml \
    -e sglang_version="$version" "$@" 2>&1 | tee "$state/last-upgrade.log" || rc=$?
  t1=$(date +%s.%N)
  local took=$((SECONDS - start))
  podman exec lab-pve1 bash -c 'echo after > /run/lab-traffic.phase'
  sleep 2
  podman exec lab-pve1 bash -c 'touch /run/lab-traffic.stop /run/lab-watch.stop
    for _ in $(seq 1 120); do [[ -s /run/lab-traffic.json ]] && exit 0; sleep 1; done; exit 1' ||
    { log "the traffic generator wrote no summary within 120 s"; rc=1; }
  podman exec lab-pve1 cat /run/lab-traffic.json >"$state/last-upgrade-traffic.json" || rc=1
  podman exec lab-pve1 cat /run/lab-watch.jsonl >"$state/last-upgrade-watch.jsonl" || rc=1
  echo
  echo "============================ lab rolling upgrade ============================"
  sed -n '/^PLAY RECAP/,/^$/p' "$state/last-upgrade.log" | tail -n +2
  python3 "$repo/tests/tools/rollout_figures.py" --play-log "$state/last-upgrade.log" \
    --traffic "$state/last-upgrade-traffic.json" --watch "$state/last-upgrade-watch.jsonl" --t0 "$t0" --t1 "$t1" \
    --nodes "${#lab_node_urls[@]}" --token-mix "$mix" || rc=1
  echo "rolling upgrade to $version: rc=$rc, ${took} s wall time (full log: .cache/lab/last-upgrade.log;" \
    "traffic and gateway samples: .cache/lab/last-upgrade-traffic.json, last-upgrade-watch.jsonl)"
  return "$rc"
}

# GPU fault drill (issue 23): the driver's Xid 79 line ("fallen off the bus") for GPU 0 in the kernel log
# the nodes' health check reads on lab-pve1 (lab-standins.yml: a stand-in file); check one node's GPUs
# (site.yml --tags health --limit NODE, default lab-sglang2, as an operator or a timer runs it); wait for
# Prometheus (in the gateway's CT) to show GpufleetNodeHealthFailed firing for it and print the time from
# the injection; run the rollout (playbooks/sglang.yml), which must stop at the first node it checks (the
# lab's three containers share lab-pve1's eight GPUs, so every node sees the fault) with its GPU verdict
# and deploy nothing; clear the fault and check again. Fails when any of it does not happen in time.
fault() {
  local node=${1:-lab-sglang2} alert=GpufleetNodeHealthFailed klog=/var/lib/gpufleet-standin/kernel.log
  cd "$repo"
  # lab-pve1 has no curl: Prometheus' API through python3 there (it shares the gateway CT's network)
  prom() { podman exec lab-pve1 python3 -c "import sys, urllib.request
sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:9090$1', timeout=5).read().decode())"; }
  prom /-/ready >/dev/null || { log "no Prometheus in the lab: run make lab first"; return 2; }
  local -a play=(ansible-playbook -i inventories/local -e @tests/harness/lab-standins.yml)
  log "injecting Xid 79 for GPU 0 into lab-pve1's kernel log ($klog)"
  local t0 t1 t2 rc=0
  t0=$(date +%s.%N)
  podman exec lab-pve1 python3 /srv/gpufleet-standins/nvidia/gpu_fault.py inject xid79 --kernel-log "$klog" --gpu 0
  ANSIBLE_FORCE_COLOR=0 "${play[@]}" site.yml --tags health --limit "$node" 2>&1 |
    tee "$state/last-fault-health.log" | grep -oE "$node: (healthy|degraded|failed)[^\"']*" || true
  t1=$(date +%s.%N)
  log "waiting for $alert{node=\"$node\"} to fire in Prometheus (deadline 300 s)"
  local firing=""
  for _ in $(seq 1 300); do
    firing=$(prom /api/v1/alerts | python3 -c "
import json, sys
alerts = json.load(sys.stdin)['data']['alerts']
print(' '.join(sorted({a['labels']['alertname'] for a in alerts
                       if a['state'] == 'firing' and a['labels'].get('node') == '$node'})))" 2>/dev/null || true)
    [[ " $firing " == *" $alert "* ]] && break
    sleep 1
  done
  t2=$(date +%s.%N)
  if [[ " $firing " == *" $alert "* ]]; then
    python3 -c "print(f'[lab] $alert firing for $node {$t2 - $t0:.1f} s after the fault was injected '
                      f'(health check {$t1 - $t0:.1f} s, then scrape and rule evaluation {$t2 - $t1:.1f} s); '
                      f'firing for the node: $firing')"
  else
    log "$alert did not fire for $node within 300 s (firing for it: ${firing:-none})"; rc=1
  fi
  log "the rollout must stop at the first node it checks, with its GPU verdict, changing nothing"
  local prc=0 stopped
  ANSIBLE_FORCE_COLOR=0 "${play[@]}" playbooks/sglang.yml 2>&1 | tee "$state/last-fault-rollout.log" >/dev/null || prc=$?
  stopped=$(grep -o "lab-sglang[0-9]: GPU health failed[^\"]*" "$state/last-fault-rollout.log" | head -1 | cut -c1-300 || true)
  if [[ $prc -ne 0 && -n $stopped ]] && grep -q "Nothing was deployed or restarted on the node" "$state/last-fault-rollout.log"; then
    log "rollout stopped (rc=$prc): $stopped"
  else
    log "the rollout did not stop at a failed node without changes (rc=$prc; .cache/lab/last-fault-rollout.log)"; rc=1
  fi
  log "clearing the fault and checking again"
  podman exec lab-pve1 python3 /srv/gpufleet-standins/nvidia/gpu_fault.py clear --kernel-log "$klog"
  local after
  after=$(ANSIBLE_FORCE_COLOR=0 "${play[@]}" site.yml --tags health 2>&1 | grep -oE "lab-sglang[0-9]: (healthy|degraded|failed)[^\"']*" || true)
  echo "$after"
  [[ $(grep -c ": healthy$" <<<"$after") -eq 3 ]] || { log "not every node is healthy again after the fault was cleared"; rc=1; }
  return "$rc"
}

down() {
  podman rm -f lab-sglang1 >/dev/null 2>&1 || true
  bash "$repo/tests/harness/pve-standin.sh" down lab-pve1 "$lab_ssh_port" "$known_hosts"
  log "lab removed"
}

status() { podman ps -a --filter name=lab- --format '{{.Names}} {{.Status}}'; }

cmd=${1:-}
shift || true
case "$cmd" in
  up) up ;;
  converge) converge "$@" ;;
  upgrade) upgrade "$@" ;;
  fault) fault "$@" ;;
  down) down ;;
  status) status ;;
  *) echo "usage: lab.sh up | converge [ansible-playbook args] | upgrade VERSION [args] | down | status" >&2; exit 2 ;;
esac
