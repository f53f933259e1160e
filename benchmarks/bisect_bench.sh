#!/bin/sh
# The time `vmxsim bisect` takes to find a divergence injected at VM exit 100,000 of a
# long run (issue 18, "Figures"): vmx_bench with 40,000 iterations (120,001 exits: CPUID,
# OUT and VMCALL each iteration); side B sets the guest's RAX to 1 at its exit 99,999 (a
# VMCALL, which vmx_bench's handler then takes as the guest's end), so the runs agree up
# to that exit's handling and diverge at exit 100,000. Each snapshot interval K is timed
# ROUNDS times (default 3); the script prints per K the median wall-clock and CPU
# seconds, the number of snapshots and their total size, and checks bisect's answer.
#
#   benchmarks/bisect_bench.sh [BUILD_DIR] [ROUNDS] [K ...]     (default: build 3 10000)
set -eu
BUILD=${1:-build}
ROUNDS=${2:-3}
shift 2 2>/dev/null || shift $#
KS=${*:-10000}
VMXSIM=$BUILD/vmxsim
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp "$BUILD/hvm/vmx_bench.elf" "$WORK/bench.elf"
cd "$WORK"
A="bench.elf --append iters=40000"
B="$A --set-at-exit 99999:rax=1"
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
case $VMXSIM in /*) ;; *) VMXSIM=$OLDPWD/$VMXSIM ;; esac
echo "K  wall-s(median)  cpu-s(median)  snapshots  snapshot-MB"
for K in $KS; do
  : >wall; : >cpu
  for R in $(seq "$ROUNDS"); do
    rm -rf keep; mkdir keep
    /usr/bin/time -f "%e %U %S" -o t "$VMXSIM" bisect --a "$A" --b "$B" \
      --snapshot-every-exits "$K" --last-insns 4 --work-dir keep >out 2>err || st=$?
    if [ "${st:-0}" != 1 ] || ! grep -q "^bisect: A and B diverge at VM exit 100000 of CPU 0" out; then
      echo "bisect did not find exit 100000 (status ${st:-0})" >&2; cat err >&2; exit 1
    fi
    st=0
    tail -1 t | awk '{print $1}' >>wall
    tail -1 t | awk '{print $2 + $3}' >>cpu
  done
  N=$(ls keep/*.snap | wc -l)
  MB=$(du -cm keep/*.snap | tail -1 | awk '{print $1}')
  echo "$K  $(median <wall)  $(median <cpu)  $N  $MB"
done
