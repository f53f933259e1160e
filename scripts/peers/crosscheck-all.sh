#!/usr/bin/env bash
# Every reference-peer comparison of the project's guest images, one after the other
# (never two peers at once), then a summary table:
#   Bochs 2.7 (software VMX): vmx_e2e (also against its recording
#     hvm/images/vmx_e2e/expected_bochs.log), vmx_bench, smp and smp_work with 4
#     processors, selftest, loop;
#   QEMU TCG (no VMX): selftest, loop, smp and smp_work with 4 processors.
#   scripts/peers/crosscheck-all.sh [--build DIR] [--only bochs|qemu] [--summary FILE]
# --build DIR   the build directory with vmxsim and hvm/*.elf (configured with
#               -DVMXSIM_IMAGES=ON; default: build)
# --summary FILE  also write the table (markdown) to FILE
# Each comparison's own output (compare-bochs.sh, compare-qemu.sh) goes to stderr; the
# table to stdout. Exit status 0 when every comparison is identical or differs only as
# docs/peer-deviations.md documents, 1 otherwise (including a peer that is not
# installed), 2 bad arguments or missing images.
set -euo pipefail
Here=$(cd "$(dirname "$0")" && pwd)
Build=build Only= SummaryFile=
while [ $# -gt 0 ]; do
  case $1 in
  --build) Build=${2:?}; shift 2 ;;
  --only) Only=${2:?}; shift 2 ;;
  --summary) SummaryFile=${2:?}; shift 2 ;;
  *) echo "usage: $0 [--build DIR] [--only bochs|qemu] [--summary FILE]" >&2; exit 2 ;;
  esac
done
Images="$Build/hvm"
for I in vmx_e2e vmx_bench smp smp_work selftest loop; do
  [ -f "$Images/$I.elf" ] || {
    echo "crosscheck-all: no $Images/$I.elf (configure $Build with -DVMXSIM_IMAGES=ON and build the images)" >&2
    exit 2
  }
done
export VMXSIM_BUILD=$Build

Rows=() Failures=0
run() { # compare-script args...
  local Out Status=0
  Out=$("$Here/$1" "${@:2}" 2>&1) || Status=$?
  printf '%s\n' "$Out" | grep -v '^RESULT' >&2 || true
  local Line
  Line=$(printf '%s\n' "$Out" | grep '^RESULT' | tail -n 1) || true
  [ -n "$Line" ] || Line=$(printf 'RESULT\t%s\t%s\t-\tFAILED (status %s)\t-\t-' "${*: -1}" "$1" "$Status")
  Rows+=("$Line")
  [ "$Status" -eq 0 ] || Failures=$((Failures + 1))
}

if [ "$Only" != qemu ]; then
  run compare-bochs.sh --expected "$Here/../../hvm/images/vmx_e2e/expected_bochs.log" "$Images/vmx_e2e.elf"
  run compare-bochs.sh "$Images/vmx_bench.elf" iters=1000
  run compare-bochs.sh --cpus 4 "$Images/smp.elf"
  run compare-bochs.sh --cpus 4 "$Images/smp_work.elf" iters=100000
  run compare-bochs.sh "$Images/selftest.elf" "determinism check"
  run compare-bochs.sh "$Images/loop.elf" iters=1000000
fi
if [ "$Only" != bochs ]; then
  run compare-qemu.sh "$Images/selftest.elf" "determinism check"
  run compare-qemu.sh "$Images/loop.elf" iters=1000000
  run compare-qemu.sh --cpus 4 "$Images/smp.elf"
  run compare-qemu.sh --cpus 4 "$Images/smp_work.elf" iters=100000
fi

Table=$(
  echo "| image (command line) | peer | lines compared (vmxsim/peer) | result | vmxsim s | peer s |"
  echo "|---|---|---|---|---|---|"
  for R in "${Rows[@]}"; do
    IFS=$'\t' read -r _ Image Peer Lines Verdict TV TP <<<"$R"
    echo "| $Image | $Peer | $Lines | $Verdict | $TV | $TP |"
  done
  echo
  echo "$(( ${#Rows[@]} - Failures )) of ${#Rows[@]} comparisons identical or differing only as docs/peer-deviations.md documents."
)
printf '%s\n' "$Table"
[ -z "$SummaryFile" ] || printf '%s\n' "$Table" >"$SummaryFile"
[ "$Failures" -eq 0 ]
