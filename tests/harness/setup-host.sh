#!/usr/bin/env bash
# Prepares this machine to run the test hosts: Podman (runc runtime, ulimits within the
# machine's limits), debootstrap, LXC, GNU patch, dpkg-dev and the OpenSSH client (the lab's
# Proxmox stand-in is reached over SSH), Debian's chromium (tests/unit/test_fleet_report.py opens
# the fleet report in it headless; no browser is downloaded) and Debian's prometheus and
# prometheus-alertmanager for their promtool and amtool (`make lint` checks the fleet_monitoring
# role's files with them; the daemons are not wanted here: on a systemd host their postinst starts
# them, and this script stops and disables them). Idempotent; safe to re-run.
set -euo pipefail

need=()
for pair in podman:podman runc:runc debootstrap:debootstrap lxc-create:lxc patch:patch \
            dpkg-scanpackages:dpkg-dev ssh:openssh-client ssh-keygen:openssh-client \
            chromium:chromium promtool:prometheus amtool:prometheus-alertmanager; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
if ((${#need[@]})); then
  echo "harness: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${need[@]}" uidmap slirp4netns fuse-overlayfs >/dev/null
fi
# only the tools: a systemd host started the daemons of the packages installed just now (a host
# without systemd as PID 1 never does: invoke-rc.d refuses); a Prometheus installed before is left alone
if [[ -d /run/systemd/system ]]; then
  for pkg in prometheus prometheus-alertmanager; do
    if [[ " ${need[*]} " == *" $pkg "* ]]; then
      systemctl disable --now --quiet "$pkg" 2>/dev/null || true
      echo "harness: stopped and disabled $pkg.service (only its promtool/amtool is used)"
    fi
  done
fi

conf=/etc/containers/containers.conf
want='# managed by gpufleet tests/harness/setup-host.sh
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
'
if [[ "$(cat "$conf" 2>/dev/null)" != "${want%$'\n'}" ]]; then
  mkdir -p /etc/containers
  printf '%s' "$want" > "$conf"
  echo "harness: wrote $conf (runtime runc: crun refuses this hybrid-cgroup host)"
fi
