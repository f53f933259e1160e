#!/usr/bin/env bash
# Builds vmxsim and runs the whole test suite twice: an optimised build with -Werror, and
# an AddressSanitizer + UndefinedBehaviorSanitizer build. This is the README's second
# Quick start command and what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
jobs=$(nproc)

build() { # dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DVMXSIM_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
  ninja -C "$dir" -j "$jobs"
}

echo "== guests (Debian's Linux and Xen, into a cache outside the checkout)"
# The tests that boot them say SKIPPED with the reason when the cache is absent, so a
# machine without the Debian archive still runs everything else.
./scripts/fetch-guests.sh >/dev/null ||
  echo "test: the guest cache could not be filled; the Linux and Xen boot tests will be skipped"
echo "== layering (docs/ARCHITECTURE.md)"
./scripts/check-layering.sh
echo "== build (RelWithDebInfo, -Werror)"
mkdir -p build
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== tests"
ctest --test-dir build -j "$jobs" --output-on-failure --timeout 900

echo "== build (ASan + UBSan)"
mkdir -p build-asan
build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVMXSIM_SANITIZE=ON -DVMXSIM_BENCHMARKS=OFF
echo "== tests under ASan + UBSan"
# The boots of Debian's Linux, alone, as Xen's dom0 (with or without the Xen kit's
# domU) or running KVM (billions of guest instructions: a minute or more each in the
# optimised build, ten times that under the sanitizers), and the snapshot of a Linux boot,
# run in the optimised build only; under the sanitizers Xen's short no-dom0 boot and the loader tests exercise the
# same loaders and devices.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j "$jobs" --output-on-failure --timeout 900 \
  -E '^LinuxBoot\.|^LinuxBootSnapshot\.|^XenBoot\.XenBootsLinux|^LinuxKvm\.|^XenKit\.'
