#!/usr/bin/env bash
# Boots a Multiboot image under QEMU TCG, headless, UART on stdout.
#   scripts/peers/run-qemu.sh IMAGE [QEMU ARGS...]
# e.g. run-qemu.sh build/hvm/selftest.elf -append "hello world" -icount shift=0
# Exit status is QEMU's: (isa-debug-exit value << 1) | 1, so 1 means the image exited
# with 0; 0 means QEMU stopped some other way (for example a triple fault with
# -no-reboot).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 IMAGE [QEMU ARGS...]" >&2
  exit 2
fi
image=$1
shift
"$(dirname "$0")/install-qemu.sh"
exec qemu-system-x86_64 -nodefaults -display none -no-reboot -serial stdio \
  -device isa-debug-exit,iobase=0xf4,iosize=4 -cpu max -kernel "$image" "$@"
