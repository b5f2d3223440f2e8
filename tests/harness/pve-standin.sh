#!/usr/bin/env bash
# A Podman systemd container standing in for a Proxmox VE host, as Ansible reaches one: sshd
# published on 127.0.0.1:PORT (root, key authentication), real LXC (Debian's lxc), and the pct
# stand-in (tests/standins/pct/pct) as /usr/sbin/pct, where community.proxmox.proxmox_pct_remote
# calls it. Privileged with the host cgroup namespace so that it can run LXC guests.
# Used by lab.sh (lab-pve1) and tests/integration/test_pct_connection.py.
#
#   pve-standin.sh up NAME PORT STATE_DIR KNOWN_HOSTS [podman run options...]
#       starts NAME unless it runs; makes STATE_DIR/id_ed25519 (the controller's key) once and
#       authorizes it; replaces the entry of [127.0.0.1]:PORT in KNOWN_HOSTS with NAME's host
#       keys, read from the container itself (podman exec, not over the network), so host key
#       checking stays on; returns once `ssh -o StrictHostKeyChecking=yes` logs in (30 s deadline).
#   pve-standin.sh down NAME PORT KNOWN_HOSTS
#   pve-standin.sh running NAME
#       exits 0 when NAME runs: podman says so AND a command runs in it (podman's record can say
#       running for a container whose processes are gone, as after the machine was restored)
# PVE_STANDIN_RELEASE (default debian12): the Debian release of the host, as Proxmox VE ships it:
# debian12 (bookworm, Python 3.11, LXC 5) is Proxmox VE 8, debian13 (trixie, Python 3.13, LXC 6) is
# Proxmox VE 9; the image is make images' localhost/gpufleet-test:<release>. `up` refuses a NAME that
# runs another release (lab.sh down first) instead of leaving the old one up.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
release=${PVE_STANDIN_RELEASE:-debian12}
case $release in
  debian12 | debian13) ;;
  *) echo "pve-standin.sh: PVE_STANDIN_RELEASE must be debian12 (Proxmox VE 8) or debian13 (Proxmox VE 9), not '$release'" >&2; exit 2 ;;
esac
image=localhost/gpufleet-test:$release
log() { printf '[pve-standin] %s\n' "$*"; }
running() {
  [[ "$(podman inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" == "true" ]] && podman exec "$1" true >/dev/null 2>&1
}

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

forget() {
  local known_hosts=$1 entry=$2
  [[ -f "$known_hosts" ]] || return 0
  ssh-keygen -q -R "$entry" -f "$known_hosts" >/dev/null 2>&1 || true
  rm -f "$known_hosts.old"
}

up() {
  local name=$1 port=$2 state=$3 known_hosts=$4
  shift 4
  local entry="[127.0.0.1]:$port" keys="" _
  mkdir -p "$state" && chmod 700 "$state"
  [[ -f "$state/id_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -C "gpufleet-$name" -f "$state/id_ed25519"
  if running "$name"; then
    local runs
    runs=$(podman inspect -f '{{.ImageName}}' "$name")
    if [[ $runs != "$image" ]]; then
      log "$name runs $runs, not $image (PVE_STANDIN_RELEASE=$release): take it down first (make lab-down)"
      return 1
    fi
  else
    podman rm -f "$name" >/dev/null 2>&1 || true
    log "starting $name ($release, ssh on 127.0.0.1:$port)"
    podman run -d --name "$name" --hostname "$name" --systemd=always \
      --privileged --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
      -p "127.0.0.1:$port:22" \
      -v "$repo/tests/standins:/srv/gpufleet-standins:ro" \
      "$@" "$image" /sbin/init >/dev/null
    wait_systemd "$name"
    # the test image carries Debian's openssh-server (tests/harness/build-image.sh)
    log "$name: lxc from Debian, the pct stand-in as /usr/sbin/pct"
    podman exec -e DEBIAN_FRONTEND=noninteractive "$name" bash -c \
      'apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends lxc >/dev/null'
    podman exec "$name" ln -sf /srv/gpufleet-standins/pct/pct /usr/sbin/pct
  fi
  podman exec -i "$name" bash -c \
    'install -d -m 700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys' \
    < "$state/id_ed25519.pub"
  for _ in $(seq 1 30); do
    keys=$(podman exec "$name" sh -c 'cat /etc/ssh/ssh_host_*_key.pub' 2>/dev/null) && [[ -n "$keys" ]] && break
    sleep 1
  done
  [[ -n "$keys" ]] || { log "$name has no SSH host keys after 30 s"; return 1; }
  mkdir -p "$(dirname "$known_hosts")"
  forget "$known_hosts" "$entry"
  awk -v host="$entry" '{print host, $1, $2}' <<<"$keys" >> "$known_hosts"
  for _ in $(seq 1 30); do
    ssh -q -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$known_hosts" \
      -o ConnectTimeout=5 -i "$state/id_ed25519" -p "$port" root@127.0.0.1 true && return 0
    sleep 1
  done
  log "ssh root@127.0.0.1:$port did not log in within 30 s"; return 1
}

down() {
  local name=$1 port=$2 known_hosts=$3
  podman rm -f "$name" >/dev/null 2>&1 || true
  forget "$known_hosts" "[127.0.0.1]:$port"
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) (($# >= 4)) || { echo "usage: pve-standin.sh up NAME PORT STATE_DIR KNOWN_HOSTS [podman run options]" >&2; exit 2; }
      up "$@" ;;
  down) (($# == 3)) || { echo "usage: pve-standin.sh down NAME PORT KNOWN_HOSTS" >&2; exit 2; }
      down "$@" ;;
  running) (($# == 1)) || { echo "usage: pve-standin.sh running NAME" >&2; exit 2; }
      running "$@" ;;
  *) echo "usage: pve-standin.sh up NAME PORT STATE_DIR KNOWN_HOSTS [podman run options] | down NAME PORT KNOWN_HOSTS | running NAME" >&2
     exit 2 ;;
esac
