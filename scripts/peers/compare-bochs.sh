#!/usr/bin/env bash
# Runs a Multiboot image on vmxsim and on Bochs 2.7 (software VMX, through run-bochs.sh)
# and compares their UART output line for line. Every difference must be one that
# deviations.tsv documents (docs/peer-deviations.md gives the SDM rule or the platform
# reason for each); anything else fails.
#   scripts/peers/compare-bochs.sh [--cpus N] [--expected LOG] IMAGE [CMDLINE]
# e.g. compare-bochs.sh --expected hvm/images/vmx_e2e/expected_bochs.log build/hvm/vmx_e2e.elf
#      compare-bochs.sh build/hvm/vmx_bench.elf iters=1000
#      compare-bochs.sh --cpus 4 build/hvm/smp.elf
# --expected LOG also compares Bochs' output with a recorded log, byte for byte (so a
# stale recording is noticed), and vmxsim's with it.
# Both machines get 256 MiB and N processors (default 1).
#
# Exit status: 0 identical or every difference documented; 1 an undocumented
# difference, or a run that did not end with the guest's own exit; 2 bad arguments or
# no vmxsim; 3 Bochs not installed. No run hangs: vmxsim has an instruction limit and
# a timeout (compare-lib.sh), Bochs a timeout (PEER_TIMEOUT seconds, default 120).
# The last line is a tab-separated "RESULT" line for crosscheck-all.sh.
set -euo pipefail
Tool=compare-bochs
source "$(dirname "$0")/compare-lib.sh"

Cpus=1 Expected=
while [ $# -gt 0 ]; do
  case $1 in
  --cpus) Cpus=${2:?}; shift 2 ;;
  --expected) Expected=${2:?}; shift 2 ;;
  -*) echo "usage: $0 [--cpus N] [--expected LOG] IMAGE [CMDLINE]" >&2; exit 2 ;;
  *) break ;;
  esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 [--cpus N] [--expected LOG] IMAGE [CMDLINE]" >&2
  exit 2
fi
Image=$1 Cmdline=${2:-}
[ -f "$Image" ] || { echo "$Tool: no such image: $Image" >&2; exit 2; }
[ -z "$Expected" ] || [ -f "$Expected" ] || { echo "$Tool: no such log: $Expected" >&2; exit 2; }
vmxsimProgram >/dev/null || exit 2
Name=$(basename "$Image")

Work=$(mktemp -d "${TMPDIR:-/tmp}/compare-bochs.XXXXXX")
trap 'rm -rf "$Work"' EXIT

T0=$(nowSeconds)
VmxsimStatus=$(runVmxsim "$Work/vmxsim.txt" -m 256 --smp "$Cpus" "$Image" --append "$Cmdline")
T1=$(nowSeconds)
BochsStatus=0
BOCHS_CPUS=$Cpus BOCHS_TIMEOUT=${PEER_TIMEOUT:-120} \
  "$PeersDir/run-bochs.sh" "$Image" "$Cmdline" >"$Work/bochs.txt" 2>"$Work/bochs.stderr" ||
  BochsStatus=$?
T2=$(nowSeconds)
TimeV=$(elapsed "$T0" "$T1") TimeB=$(elapsed "$T1" "$T2")

if [ "$BochsStatus" -eq 3 ]; then
  cat "$Work/bochs.stderr" >&2
  echo "$Tool: $Name: cannot compare: Bochs is not installed" >&2
  resultLine "$Name" bochs - "Bochs not installed" "$TimeV" -
  exit 3
fi

Failed=0 RunFailed=0
if [ $((VmxsimStatus % 2)) -ne 1 ]; then
  echo "$Tool: $Name: vmxsim did not end with the guest's exit (status $VmxsimStatus)" >&2
  Failed=1 RunFailed=1
fi
if [ "$BochsStatus" -ne 0 ]; then
  # run-bochs.sh: 124 timeout, 1 stopped without the Shutdown port (its log tail says why).
  sed 's/^/  /' "$Work/bochs.stderr" >&2
  if [ "$BochsStatus" -eq 124 ]; then
    echo "$Tool: $Name: Bochs did not finish within ${PEER_TIMEOUT:-120} s (PEER_TIMEOUT)" >&2
  else
    echo "$Tool: $Name: Bochs stopped without the guest's Shutdown-port exit (status $BochsStatus)" >&2
  fi
  Failed=1 RunFailed=1
fi

echo "$Tool: $Name: vmxsim $TimeV s (status $VmxsimStatus), Bochs $TimeB s (Shutdown port: the guest's exit code is lost on Bochs)"
Mode=; [ "$RunFailed" -eq 0 ] || Mode=prefix
compareOutputs bochs "$Name" "$Work/vmxsim.txt" "$Work/bochs.txt" \
  $Mode || Failed=1
Summary="$Verdict"
if [ -n "$Expected" ]; then
  if cmp -s "$Work/bochs.txt" "$Expected"; then
    echo "$Tool: $Name: Bochs' output equals $Expected byte for byte"
    Summary="$Summary; = recorded log"
  else
    echo "$Tool: $Name: Bochs' output differs from the recording $Expected:"
    diff "$Expected" "$Work/bochs.txt" | sed 's/^/  /' || true
    Summary="$Summary; RECORDED LOG STALE"
    Failed=1
  fi
  if ! cmp -s "$Work/vmxsim.txt" "$Expected"; then
    echo "$Tool: $Name: vmxsim's output differs from the recording $Expected"
    Failed=1
  fi
fi
[ "$RunFailed" -eq 0 ] || Summary="$Summary; RUN FAILED"
Label="$Name${Cmdline:+ $Cmdline}"
[ "$Cpus" -eq 1 ] || Label="$Label, $Cpus CPUs"
resultLine "$Label" bochs "$Compared" "$Summary" "$TimeV" "$TimeB"
exit "$Failed"
