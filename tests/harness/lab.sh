#!/usr/bin/env bash
# The simulated lab of inventories/local on this machine:
#   lab-pve1     a privileged Podman systemd container (host cgroup namespace) standing in for a
#                Proxmox VE host: sshd published on 127.0.0.1:$lab_ssh_port, real LXC, the pct
#                stand-in (tests/standins/pct/pct) as /usr/sbin/pct; the NVIDIA kernel module,
#                apt repository and nvidia-smi are stand-ins (tests/standins/)
#   CT 101       the LXC guest that proxmox_lxc_gpu creates on lab-pve1 (inventory host
#                lab-sglang1), reached with community.proxmox.proxmox_pct_remote: SSH (paramiko)
#                to lab-pve1, then `pct exec 101 -- ...`, exactly as inventories/lab reaches its
#                containers
# The controller's SSH key is made here (.cache/lab/ssh/); lab-pve1's host keys are read from the
# container itself (podman exec, not over the network) into ~/.ssh/known_hosts, replacing any old
# entry for [127.0.0.1]:$lab_ssh_port, so host key checking stays on.
# usage: lab.sh up | converge [ansible-playbook args] | down | status
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}
state="$repo/.cache/lab"
image=localhost/gpufleet-test:debian12
lab_sglang_version=0.5.12.post1
lab_ssh_port=2222
known_hosts=$HOME/.ssh/known_hosts
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

# lab-pve1's host keys, read from the container, replace any old entry in ~/.ssh/known_hosts (where
# both OpenSSH and proxmox_pct_remote's paramiko look); a deadline holds while sshd starts.
trust_host_keys() {
  local entry="[127.0.0.1]:$lab_ssh_port" keys _
  for _ in $(seq 1 30); do
    keys=$(podman exec lab-pve1 sh -c 'cat /etc/ssh/ssh_host_*_key.pub' 2>/dev/null) && [[ -n "$keys" ]] && break
    sleep 1
  done
  [[ -n "$keys" ]] || { log "lab-pve1 has no SSH host keys after 30 s"; return 1; }
  mkdir -p "$(dirname "$known_hosts")" && chmod 700 "$(dirname "$known_hosts")"
  touch "$known_hosts"
  ssh-keygen -q -R "$entry" -f "$known_hosts" >/dev/null 2>&1 || true
  rm -f "$known_hosts.old"
  awk -v host="$entry" '{print host, $1, $2}' <<<"$keys" >> "$known_hosts"
  for _ in $(seq 1 30); do
    ssh -q -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=5 -i "$state/ssh/id_ed25519" \
      -p "$lab_ssh_port" root@127.0.0.1 true && return 0
    sleep 1
  done
  log "ssh root@127.0.0.1:$lab_ssh_port did not answer in 30 s"; return 1
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

  mkdir -p "$state/ssh" && chmod 700 "$state/ssh"
  [[ -f "$state/ssh/id_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -C gpufleet-lab -f "$state/ssh/id_ed25519"
  if ! running lab-pve1; then
    podman rm -f lab-pve1 >/dev/null 2>&1 || true
    rm -rf "${state:?}/proc" && mkdir -p "$state/proc"
    log "starting lab-pve1"
    podman run -d --name lab-pve1 --hostname lab-pve1 --systemd=always \
      --privileged --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
      -p "127.0.0.1:$lab_ssh_port:22" \
      -v "$repo/.cache/standin-apt:/srv/gpufleet-standin-apt:ro" \
      -v "$state/proc:/var/lib/gpufleet-standin/proc" \
      -v "$repo/.cache/lxc/debian12-rootfs.tar:/srv/lxc/debian12-rootfs.tar:ro" \
      -v "$cache/wheels:/srv/wheels:ro" \
      -v "$repo/tests/standins:/srv/gpufleet-standins:ro" \
      "$image" /sbin/init >/dev/null
    wait_systemd lab-pve1
    # /proc/devices always exists; the stand-in kernel module adds its majors on install
    podman exec lab-pve1 cp /proc/devices /var/lib/gpufleet-standin/proc/devices
    log "lab-pve1: openssh-server, the pct stand-in as /usr/sbin/pct"
    podman exec -e DEBIAN_FRONTEND=noninteractive lab-pve1 bash -c \
      'apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends openssh-server lxc >/dev/null'
    podman exec lab-pve1 ln -sf /srv/gpufleet-standins/pct/pct /usr/sbin/pct
  fi
  podman exec -i lab-pve1 bash -c 'install -d -m 700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys' \
    < "$state/ssh/id_ed25519.pub"
  trust_host_keys
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
  podman rm -f lab-sglang1 lab-pve1 >/dev/null 2>&1 || true
  [[ -f "$known_hosts" ]] && ssh-keygen -q -R "[127.0.0.1]:$lab_ssh_port" -f "$known_hosts" >/dev/null 2>&1 && rm -f "$known_hosts.old"
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
