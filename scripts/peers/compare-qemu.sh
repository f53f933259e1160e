#!/usr/bin/env bash
# Runs a Multiboot image on vmxsim and on QEMU TCG (through run-qemu.sh, -cpu max) and
# compares their UART output line for line, and their exit statuses (both report a
# guest's isa-debug-exit write of V as (V << 1) | 1). QEMU has no VMX: this is for the
# project's non-VMX images. Every difference must be one that deviations.tsv documents
# (docs/peer-deviations.md); anything else fails.
#   scripts/peers/compare-qemu.sh [--cpus N] IMAGE [CMDLINE]
# e.g. compare-qemu.sh build/hvm/selftest.elf "determinism check"
#      compare-qemu.sh --cpus 4 build/hvm/smp.elf
# Both machines get 128 MiB (QEMU's default) and N processors (default 1); QEMU runs
# with -icount shift=0, its deterministic mode, so its multi-processor interleaving is
# the same from run to run.
#
# Exit status: 0 identical or every difference documented; 1 an undocumented
# difference, different exit statuses, or a run that did not end with the guest's own
# exit; 2 bad arguments or no vmxsim; 3 QEMU not installed. No run hangs: vmxsim has an
# instruction limit and a timeout (compare-lib.sh), QEMU a timeout (PEER_TIMEOUT
# seconds, default 120). The last line is a tab-separated "RESULT" line for
# crosscheck-all.sh.
set -euo pipefail
Tool=compare-qemu
source "$(dirname "$0")/compare-lib.sh"

Cpus=1
while [ $# -gt 0 ]; do
  case $1 in
  --cpus) Cpus=${2:?}; shift 2 ;;
  -*) echo "usage: $0 [--cpus N] IMAGE [CMDLINE]" >&2; exit 2 ;;
  *) break ;;
  esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 [--cpus N] IMAGE [CMDLINE]" >&2
  exit 2
fi
Image=$1 Cmdline=${2:-}
[ -f "$Image" ] || { echo "$Tool: no such image: $Image" >&2; exit 2; }
vmxsimProgram >/dev/null || exit 2
Name=$(basename "$Image")
Qemu=${QEMU_BIN:-qemu-system-x86_64}
[ -n "${QEMU_BIN:-}" ] || "$PeersDir/install-qemu.sh" || true
if ! command -v "$Qemu" >/dev/null 2>&1; then
  echo "$Tool: QEMU is not installed ('$Qemu' not found; scripts/peers/install-qemu.sh installs it)" >&2
  resultLine "$Name" qemu - "QEMU not installed" - -
  exit 3
fi

Work=$(mktemp -d "${TMPDIR:-/tmp}/compare-qemu.XXXXXX")
trap 'rm -rf "$Work"' EXIT

T0=$(nowSeconds)
VmxsimStatus=$(runVmxsim "$Work/vmxsim.txt" -m 128 --smp "$Cpus" "$Image" --append "$Cmdline")
T1=$(nowSeconds)
# The same command line as run-qemu.sh, with the serial port in a file so that QEMU's
# own messages (stderr) stay apart.
QemuStatus=0
timeout -k 5 "${PEER_TIMEOUT:-120}" "$Qemu" -nodefaults -display none -no-reboot \
  -serial "file:$Work/qemu.txt" -device isa-debug-exit,iobase=0xf4,iosize=4 -cpu max \
  -m 128 -smp "$Cpus" -icount shift=0 -kernel "$Image" -append "$Cmdline" \
  </dev/null >/dev/null 2>"$Work/qemu.stderr" || QemuStatus=$?
T2=$(nowSeconds)
[ -f "$Work/qemu.txt" ] || : >"$Work/qemu.txt"
TimeV=$(elapsed "$T0" "$T1") TimeQ=$(elapsed "$T1" "$T2")

Failed=0 RunFailed=0
if [ $((VmxsimStatus % 2)) -ne 1 ]; then
  echo "$Tool: $Name: vmxsim did not end with the guest's exit (status $VmxsimStatus)" >&2
  Failed=1 RunFailed=1
fi
case $QemuStatus in
124 | 137)
  echo "$Tool: $Name: QEMU did not finish within ${PEER_TIMEOUT:-120} s (PEER_TIMEOUT)" >&2
  Failed=1 RunFailed=1 ;;
*) if [ $((QemuStatus % 2)) -ne 1 ]; then
     sed 's/^/  /' "$Work/qemu.stderr" >&2
     echo "$Tool: $Name: QEMU stopped without the guest's exit (status $QemuStatus: a triple fault, or QEMU failed)" >&2
     Failed=1 RunFailed=1
   fi ;;
esac

echo "$Tool: $Name: vmxsim $TimeV s (status $VmxsimStatus), QEMU $TimeQ s (status $QemuStatus)"
Mode=; [ "$RunFailed" -eq 0 ] || Mode=prefix
compareOutputs qemu "$Name" "$Work/vmxsim.txt" "$Work/qemu.txt" \
  $Mode || Failed=1
Summary="$Verdict"
if [ "$RunFailed" -eq 0 ]; then
  if [ "$VmxsimStatus" -eq "$QemuStatus" ]; then
    Summary="$Summary; same exit status $VmxsimStatus"
  else
    echo "$Tool: $Name: exit statuses differ: vmxsim $VmxsimStatus, QEMU $QemuStatus" >&2
    Summary="$Summary; EXIT STATUS $VmxsimStatus vs $QemuStatus"
    Failed=1
  fi
else
  Summary="$Summary; RUN FAILED"
fi
Label="$Name${Cmdline:+ $Cmdline}"
[ "$Cpus" -eq 1 ] || Label="$Label, $Cpus CPUs"
resultLine "$Label" qemu "$Compared" "$Summary" "$TimeV" "$TimeQ"
exit "$Failed"
