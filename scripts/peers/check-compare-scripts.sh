#!/usr/bin/env bash
# Tests of the comparison scripts themselves: the documented-difference rules
# (compare-lib.sh with deviations.tsv) on hand-made outputs, and the bad-input cases
# (a peer that is not installed, a guest that runs forever on either side, a missing
# image): each must give a clear message and a non-zero status, and no run may hang.
#   scripts/peers/check-compare-scripts.sh [--build DIR]
# The rule tests need nothing installed; the run tests need vmxsim and the images in
# DIR (default build), and run QEMU and Bochs for a few seconds each.
set -uo pipefail
Here=$(cd "$(dirname "$0")" && pwd)
Build=build
[ "${1:-}" = --build ] && Build=${2:?}
export VMXSIM_BUILD=$Build
Images=$Build/hvm
Passed=0 Failed=0
Work=$(mktemp -d "${TMPDIR:-/tmp}/check-compare.XXXXXX")
trap 'rm -rf "$Work"' EXIT

check() { # name, condition (a command)
  if "${@:2}"; then Passed=$((Passed + 1)); echo "PASS $1"
  else Failed=$((Failed + 1)); echo "FAIL $1"; fi
}

# --- The rules engine, on hand-made outputs ---
Tool=check
source "$Here/compare-lib.sh"
rule() { # peer name vmxsim-lines peer-lines expected-status expected-verdict-prefix
  printf '%b' "$3" >"$Work/a"; printf '%b' "$4" >"$Work/b"
  local Status=0
  compareOutputs "$1" "$2" "$Work/a" "$Work/b" >/dev/null || Status=$?
  [ "$Status" -eq "$5" ] && [ "${Verdict#"$6"}" != "$Verdict" ]
}
check "RulesIdenticalOutputsAreIdentical" rule qemu loop.elf 'a\nb\n' 'a\nb\n' 0 identical
check "RulesMemoryMapLinesAreExplainedForQemu" rule qemu selftest.elf \
  'x\nmmap entries=4\n' 'x\nmmap entries=7\n' 0 "explained by P3(2)"
check "RulesMemoryMapLinesAreNotExplainedForAnotherPeerRow" rule qemu selftest.elf \
  'cmdline: /a x\n' 'cmdline: x\n' 1 UNEXPLAINED
check "RulesGrubCommandLineIsExplainedForBochs" rule bochs selftest.elf \
  'cmdline: /a x\n' 'cmdline: x\n' 0 "explained by P2(2)"
check "RulesAnExtraLineIsUnexplained" rule qemu selftest.elf 'PASS a\n' 'PASS a\nFAIL b\n' 1 "UNEXPLAINED 1"
check "RulesAChangedLineIsUnexplained" rule bochs vmx_e2e.elf 'exit n=1 reason=10\n' 'exit n=1 reason=12\n' 1 "UNEXPLAINED 2"
check "RulesReorderedLinesAreExplainedOnlyForSmpImages" rule qemu smp.elf \
  's\ncpu 1\ncpu 0\ne\n' 's\ncpu 0\ncpu 1\ne\n' 0 "explained by S1"
check "RulesReorderedLinesAreUnexplainedForOneCpuImages" rule qemu selftest.elf \
  's\ncpu 1\ncpu 0\ne\n' 's\ncpu 0\ncpu 1\ne\n' 1 UNEXPLAINED
check "RulesADifferentLineAmongReorderedOnesIsUnexplained" rule qemu smp.elf \
  'cpu 1\ncpu 0\n' 'cpu 0\ncpu 2\n' 1 UNEXPLAINED

# --- Bad input: each case must fail with its message, quickly ---
# expectRun NAME STATUS MESSAGE-REGEXES MAX-SECONDS COMMAND...: the regexes (separated
# by " && ") must all match the output.
expectRun() {
  local Name=$1 Want=$2 Re=$3 Max=$4 Status=0 T0 T1
  shift 4
  T0=$(date +%s)
  "$@" >"$Work/out" 2>&1 || Status=$?
  T1=$(date +%s)
  local Found=1 R
  while [ -n "$Re" ]; do
    R=${Re%% && *}
    grep -Eq "$R" "$Work/out" || Found=0
    [ "$R" = "$Re" ] && Re= || Re=${Re#* && }
  done
  if [ "$Status" -eq "$Want" ] && [ "$Found" -eq 1 ] && [ $((T1 - T0)) -le "$Max" ]; then
    Passed=$((Passed + 1)); echo "PASS $Name (status $Status, $((T1 - T0)) s)"
  else
    Failed=$((Failed + 1)); echo "FAIL $Name (status $Status, want $Want; $((T1 - T0)) s, limit $Max s):"
    sed 's/^/  /' "$Work/out" | tail -n 15
  fi
}
if [ ! -x "$Build/vmxsim" ] || [ ! -f "$Images/loop.elf" ]; then
  echo "SKIP run tests: no $Build/vmxsim or $Images/*.elf"
else
  expectRun BochsNotInstalledIsStatus3 3 "Bochs is not installed" 30 \
    env BOCHS_BIN=/nonexistent/bochs "$Here/compare-bochs.sh" "$Images/vmx_e2e.elf"
  expectRun QemuNotInstalledIsStatus3 3 "QEMU is not installed" 30 \
    env QEMU_BIN=/nonexistent/qemu "$Here/compare-qemu.sh" "$Images/loop.elf"
  expectRun MissingImageIsStatus2 2 "no such image" 10 "$Here/compare-qemu.sh" "$Work/none.elf"
  expectRun NoVmxsimIsStatus2 2 "no vmxsim program" 10 \
    env VMXSIM=/nonexistent/vmxsim "$Here/compare-qemu.sh" "$Images/loop.elf"
  # A guest that never ends on either side: vmxsim stops at its instruction limit,
  # QEMU at its timeout.
  expectRun ForeverGuestOnBothSidesFailsWithinTheLimits 1 \
    "did not finish within 20000000 instructions && QEMU did not finish within 5 s" 40 \
    env VMXSIM_MAX_INSNS=20000000 PEER_TIMEOUT=5 "$Here/compare-qemu.sh" "$Images/loop.elf" iters=1000000000000000
  # Runs forever under vmxsim only (simulated by a limit below what selftest needs).
  expectRun ForeverUnderVmxsimOnlyFails 1 "vmxsim did not end with the guest's exit \(status 4\)" 40 \
    env VMXSIM_MAX_INSNS=100000 "$Here/compare-qemu.sh" "$Images/selftest.elf"
  # Runs forever under Bochs only (simulated by a timeout shorter than its boot).
  expectRun ForeverUnderBochsOnlyFails 1 "Bochs did not finish within 1 s" 40 \
    env PEER_TIMEOUT=1 "$Here/compare-bochs.sh" "$Images/vmx_e2e.elf"
fi

echo "check-compare-scripts: $Passed passed, $Failed failed"
[ "$Failed" -eq 0 ]
