#!/usr/bin/env bash
# The simulated lab of inventories/local on this machine:
#   lab-pve1     a privileged Podman systemd container (host cgroup namespace) standing in for a
#                Proxmox VE host: sshd published on 127.0.0.1:2222, real LXC, the pct
#                stand-in (tests/standins/pct/pct) as /usr/sbin/pct; the NVIDIA kernel module,
#                apt repository and nvidia-smi are stand-ins (tests/standins/)
#   CT 101       the LXC guest that proxmox_lxc_gpu creates on lab-pve1 (inventory host
#                lab-sglang1), reached with community.proxmox.proxmox_pct_remote: SSH (paramiko)
#                to lab-pve1, then `pct exec 101 -- ...`, exactly as inventories/lab reaches its
#                containers
# lab-pve1 comes from pve-standin.sh: the controller's SSH key in .cache/lab/ssh/, lab-pve1's host
# keys read from the container itself into ~/.ssh/known_hosts (where both OpenSSH and paramiko
# look), replacing any old entry for [127.0.0.1]:2222, so host key checking stays on.
# usage: lab.sh up | converge [ansible-playbook args] | down | status
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}
state="$repo/.cache/lab"
lab_sglang_version=0.5.12.post1
lab_ssh_port=2222
lab_hf_hub_version=2.4.0
known_hosts=$HOME/.ssh/known_hosts
log() { printf '[lab] %s\n' "$*"; }

up() {
  mkdir -p "$state/proc" "$cache/wheels"
  log "stand-in CUDA apt repository"
  python3 "$repo/tests/standins/nvidia_apt/build_repo.py" "$repo/.cache/standin-apt" >/dev/null
  log "LXC guest rootfs"
  bash "$repo/molecule/proxmox_lxc_gpu/files/guest-rootfs.sh" "$repo" >/dev/null
  if ! ls "$cache/wheels/sglang-$lab_sglang_version-"*.whl >/dev/null 2>&1; then
    log "downloading the sglang==$lab_sglang_version wheel (no dependencies)"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache/wheels" "sglang==$lab_sglang_version"
  fi
  # the uv wheel role sglang installs itself (its pin: sglang_uv_version in the role's defaults)
  uv_version=$(sed -n 's/^sglang_uv_version: "\(.*\)"$/\1/p' "$repo/roles/sglang/defaults/main.yml")
  if ! ls "$cache/wheels/uv-$uv_version-"*.whl >/dev/null 2>&1; then
    log "downloading the uv==$uv_version wheel"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache/wheels" "uv==$uv_version"
  fi

  # huggingface_hub for the model_store role's venv, as an air-gapped fleet gets it: a wheelhouse
  if ! ls "$cache/wheels/hf/huggingface_hub-$lab_hf_hub_version-"*.whl >/dev/null 2>&1; then
    log "downloading huggingface_hub==$lab_hf_hub_version and its dependencies (wheels)"
    python3 -m pip download -q --only-binary=:all: -d "$cache/wheels/hf" "huggingface_hub==$lab_hf_hub_version"
  fi

  # a new lab-pve1 starts without the stand-in kernel module: no /proc state from an old one
  if [[ "$(podman inspect -f '{{.State.Running}}' lab-pve1 2>/dev/null)" != true ]]; then
    rm -rf "${state:?}/proc" && mkdir -p "$state/proc"
  fi
  bash "$repo/tests/harness/pve-standin.sh" up lab-pve1 "$lab_ssh_port" "$state/ssh" "$known_hosts" \
    -v "$repo/.cache/standin-apt:/srv/gpufleet-standin-apt:ro" \
    -v "$state/proc:/var/lib/gpufleet-standin/proc" \
    -v "$repo/.cache/lxc/debian12-rootfs.tar:/srv/lxc/debian12-rootfs.tar:ro" \
    -v "$cache/wheels:/srv/wheels:ro"
  # the Hugging Face Hub stand-in the model_store role downloads from (a transient unit)
  if ! podman exec lab-pve1 systemctl is-active -q gpufleet-hub-standin; then
    podman exec lab-pve1 systemd-run --unit gpufleet-hub-standin --quiet \
      python3 /srv/gpufleet-standins/hf_hub.py --host 127.0.0.1 --port 8765 --size-mb 16 \
      --log /var/log/gpufleet-hub-standin.jsonl
  fi
  # /proc/devices always exists; the stand-in kernel module adds its majors on install
  [[ -s "$state/proc/devices" ]] || podman exec lab-pve1 cp /proc/devices /var/lib/gpufleet-standin/proc/devices
  # the lab before the pct connection ran its SGLang node as a second Podman container
  podman rm -f lab-sglang1 >/dev/null 2>&1 || true
  log "lab is up: lab-pve1 (ssh root@127.0.0.1:$lab_ssh_port)"
}

converge() {
  cd "$repo"
  mkdir -p "$state"
  local start=$SECONDS rc=0
  log "ansible-playbook site.yml -i inventories/local -e @tests/harness/lab-standins.yml $*"
  ANSIBLE_FORCE_COLOR=0 ansible-playbook site.yml -i inventories/local -e @tests/harness/lab-standins.yml "$@" 2>&1 | tee "$state/last-run.log" || rc=$?
  local took=$((SECONDS - start))
  echo
  echo "================================ lab summary ================================"
  sed -n '/^PLAY RECAP/,/^$/p' "$state/last-run.log" | tail -n +2
  sed -n '/Summary of the throughput gate/,/^$/p' "$state/last-run.log" | tail -n +3 | sed 's/^ *//'
  echo "site.yml: rc=$rc, ${took} s (full log: .cache/lab/last-run.log)"
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
  down) down ;;
  status) status ;;
  *) echo "usage: lab.sh up | converge [ansible-playbook args] | down | status" >&2; exit 2 ;;
esac
