#!/usr/bin/env bash
# Boots a Multiboot image on Bochs 2.7 (software VMX), headless, and prints the UART
# output captured from COM1 on stdout.
#   scripts/peers/run-bochs.sh IMAGE [CMDLINE]
# e.g. run-bochs.sh build/hvm/vmx_e2e.elf
#      run-bochs.sh build/hvm/vmx_bench.elf "iters=10000"
# Bochs 2.7 cannot load a kernel itself, so the image goes on a GRUB rescue ISO
# ("multiboot /boot/IMAGE CMDLINE"), built in a temporary directory that is removed at
# the end. GRUB 2.06 passes only CMDLINE as the Multiboot command line, without the
# image's path that QEMU and vmxsim put first (docs/peer-deviations.md, P2). The recipe
# and Bochs' known VMX deviations are in the project's docs on reference peers.
#
# Exit status: 0 when the image stopped Bochs through the "Shutdown" port (0x8900, what
# hvmExit does on Bochs: the exit code itself is lost there, so check the UART output),
# 124 on timeout, 3 when Bochs is not installed (and could not be), otherwise 1.
#
# Environment:
#   BOCHS_TIMEOUT  seconds before the run is killed (default 300)
#   BOCHS_IPS      instructions per emulated second (default 50000000): only the length
#                  of BIOS and GRUB waits depends on it; nothing is timed from the host
#   BOCHS_CPU      cpu model (default corei7_skylake_x: VMX with EPT, VPID, unrestricted
#                  guest and the preemption timer)
#   BOCHS_CPUS     number of processors (default 1; the BIOS lists them in its MADT)
#   BOCHS_BIN      the Bochs program (default bochs; a missing one is an error, status 3)
#   BOCHS_KEEP     a directory: keep the ISO, bochsrc and Bochs' log there
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 IMAGE [CMDLINE]" >&2
  exit 2
fi
image=$(readlink -f "$1")
cmdline=${2:-}
[ -f "$image" ] || { echo "run-bochs: no such image: $1" >&2; exit 2; }
"$(dirname "$0")/install-bochs.sh" || true
source "$(dirname "$0")/bochs-lib.sh"
bochs=${BOCHS_BIN:-bochs}
if ! command -v "$bochs" >/dev/null 2>&1; then
  echo "run-bochs: Bochs is not installed ('$bochs' not found; scripts/peers/install-bochs.sh installs it)" >&2
  exit 3
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/run-bochs.XXXXXX")
cleanup() {
  if [ -n "${BOCHS_KEEP:-}" ]; then
    mkdir -p "$BOCHS_KEEP" && cp -r "$work"/. "$BOCHS_KEEP"/
  fi
  rm -rf "$work"
}
trap cleanup EXIT

name=$(basename "$image")
mkdir -p "$work/iso/boot/grub"
cp "$image" "$work/iso/boot/$name"
# timeout=0 boots at once; the serial terminal keeps GRUB's own menu off the VGA-only
# path, and GRUB leaves COM1 initialised for the image.
cat > "$work/iso/boot/grub/grub.cfg" <<CFG
set timeout=0
set default=0
menuentry "image" {
  multiboot /boot/$name $cmdline
  boot
}
CFG
grub-mkrescue -o "$work/image.iso" "$work/iso" >"$work/grub-mkrescue.log" 2>&1 || {
  cat "$work/grub-mkrescue.log" >&2
  exit 1
}

writeBochsrc "$work/bochsrc" "$work/image.iso" 256 "$work/com1.txt" "$work/bochs.log"
# The debugger is compiled into Debian's Bochs: "c" continues instead of stopping at
# its prompt.
echo c > "$work/rc"

status=0
( cd "$work" && SDL_VIDEODRIVER=dummy SDL_AUDIODRIVER=dummy \
    timeout -k 10 "${BOCHS_TIMEOUT:-300}" "$bochs" -q -f bochsrc -rc rc </dev/null \
    >"$work/bochs.stdout" 2>&1 ) || status=$?
[ -f "$work/com1.txt" ] && cat "$work/com1.txt"
if [ "$status" -eq 124 ]; then
  echo "run-bochs: timed out after ${BOCHS_TIMEOUT:-300} s" >&2
  exit 124
fi
# Bochs exits with 1 both on the Shutdown port and on a panic; its log tells which.
if grep -qs "Shutdown port: shutdown requested" "$work/bochs.log" "$work/bochs.stdout"; then
  exit 0
fi
echo "run-bochs: Bochs stopped without the Shutdown port (status $status); last log lines:" >&2
tail -n 15 "$work/bochs.log" >&2 || true
exit 1
