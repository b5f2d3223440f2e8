#!/usr/bin/env bash
# The simulated lab of inventories/local on this machine, as Podman systemd containers:
#   lab-pve1     privileged (host cgroup namespace) so it can run real LXC guests; the NVIDIA
#                kernel module, apt repository and nvidia-smi are stand-ins (tests/standins/)
#   lab-sglang1  the SGLang node; sees lab-pve1's simulated /proc/driver/nvidia read-only, as an
#                LXC guest sees its host's
# usage: lab.sh up | converge | down | status
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}
state="$repo/.cache/lab"
image=localhost/gpufleet-test:debian12
lab_sglang_version=0.5.12.post1
log() { printf '[lab] %s\n' "$*"; }

running() { [[ "$(podman inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" == "true" ]]; }

wait_systemd() {
  local name=$1 _
  for _ in $(seq 1 60); do
    case "$(podman exec "$name" systemctl is-system-running 2>/dev/null || true)" in
      running|degraded) return 0 ;;
    esac
    sleep 1
  done
  log "$name: systemd did not finish booting in 60 s"; return 1
}

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

  if ! running lab-pve1; then
    podman rm -f lab-pve1 >/dev/null 2>&1 || true
    rm -rf "${state:?}/proc" && mkdir -p "$state/proc"
    log "starting lab-pve1"
    podman run -d --name lab-pve1 --hostname lab-pve1 --systemd=always \
      --privileged --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
      -v "$repo/.cache/standin-apt:/srv/gpufleet-standin-apt:ro" \
      -v "$state/proc:/var/lib/gpufleet-standin/proc" \
      -v "$repo/.cache/lxc/debian12-rootfs.tar:/srv/lxc/debian12-rootfs.tar:ro" \
      "$image" /sbin/init >/dev/null
    wait_systemd lab-pve1
    # /proc/devices always exists; the stand-in kernel module adds its majors on install
    podman exec lab-pve1 cp /proc/devices /var/lib/gpufleet-standin/proc/devices
  fi
  if ! running lab-sglang1; then
    podman rm -f lab-sglang1 >/dev/null 2>&1 || true
    log "starting lab-sglang1"
    podman run -d --name lab-sglang1 --hostname lab-sglang1 --systemd=always \
      -v "$repo/.cache/standin-apt:/srv/gpufleet-standin-apt:ro" \
      -v "$state/proc:/var/lib/gpufleet-standin/proc:ro" \
      -v "$cache/wheels:/srv/wheels:ro" \
      -v "$repo/tests/standins:/srv/gpufleet-standins:ro" \
      "$image" /sbin/init >/dev/null
    wait_systemd lab-sglang1
  fi
  log "lab is up: lab-pve1, lab-sglang1"
}

converge() {
  cd "$repo"
  mkdir -p "$state"
  local start=$SECONDS rc=0
  log "ansible-playbook site.yml -i inventories/local $*"
  ANSIBLE_FORCE_COLOR=0 ansible-playbook site.yml -i inventories/local "$@" 2>&1 | tee "$state/last-run.log" || rc=$?
  local took=$((SECONDS - start))
  echo
  echo "================================ lab summary ================================"
  sed -n '/^PLAY RECAP/,/^$/p' "$state/last-run.log" | tail -n +2
  sed -n '/Summary of the throughput gate/,/^$/p' "$state/last-run.log" | tail -n +3 | sed 's/^ *//'
  echo "site.yml: rc=$rc, ${took} s (full log: .cache/lab/last-run.log)"
  return "$rc"
}

down() {
  podman rm -f lab-sglang1 lab-pve1 >/dev/null 2>&1 || true
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
