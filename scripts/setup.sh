#!/usr/bin/env bash
# Installs the Debian packages vmxsim builds with, only those missing. Idempotent; prints
# nothing when everything is present. Reference peers (bochs, qemu) are installed by the
# scripts that use them, not here.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libzydis-dev libzycore-dev libcapstone-dev llvm-14-dev
      googletest libgtest-dev libgmock-dev libbenchmark-dev
      libcli11-dev libfmt-dev nlohmann-json3-dev
      # iasl disassembles the generated ACPI tables (tests/harness/firmware_test.cpp).
      acpica-tools
      # `vmxsim trace report` is checked in headless Chromium by a node script
      # (tests/trace/report_test.cpp, report_browser_check.mjs).
      chromium nodejs
      # The gdb stub's end-to-end test drives Debian's gdb in batch mode
      # (tests/harness/gdb_e2e_test.sh).
      gdb)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}" >&2
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
