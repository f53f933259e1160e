#!/usr/bin/env bash
# The README's first Quick start command: installs what is missing, builds vmxsim and
# its guest images, and runs the main job on the bundled default image.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >build.configure.log 2>&1 ||
  { cat build.configure.log; exit 1; }
ninja -C build vmxsim_cli vmxsim_images >/dev/null
echo "== vmxsim run build/hvm/selftest.elf"
exec ./build/vmxsim run build/hvm/selftest.elf "$@"
