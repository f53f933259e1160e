#!/usr/bin/env bash
# Installs QEMU (qemu-system-x86), a reference peer used by cross-checks and benchmarks.
# Idempotent and quiet: prints nothing when it is already present. It is not a build
# dependency, so scripts/setup.sh leaves it out.
set -euo pipefail
command -v qemu-system-x86_64 >/dev/null 2>&1 && exit 0
echo "install-qemu: installing qemu-system-x86" >&2
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
