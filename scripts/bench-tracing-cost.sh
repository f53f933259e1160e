#!/usr/bin/env bash
# What tracing costs in process CPU time (user + system: writing a trace file is mostly
# the kernel copying it into the page cache, which wall-clock-difference benchmarks blur
# on a shared machine) and in wall-clock time. The trace files are written by a thread of
# their own (trace/async_output.h), so the two measure different things: CPU time counts
# that thread's work too (moving work to a thread never shrinks it), wall-clock time is
# how long the run takes, which is what exit throughput is (on a machine with a core to
# spare for the writer; on a loaded one, wall-clock time also counts other processes'). The vmx_bench image's exit loop (CPUID, OUT, VMCALL; 3 * ITERS + 1
# exits, an exit every third guest instruction: the worst case) is run ROUNDS times in
# each of four variants, interleaved, and the median CPU seconds (user, system, their sum)
# and wall-clock seconds of each are printed:
#   off    trace=0, no trace file
#   gt     trace=0, --trace-ground-truth FILE (the emulator records every exit and entry)
#   rings  trace=1 (the hypervisor traces every exit into its ring), --xentrace /dev/null
#   all    trace=1, --xentrace FILE and --trace-ground-truth FILE
# Each run writes new files (the previous round's are removed before it, untimed).
# with the ratios gt/off (the emulator's ground truth) and all/rings (writing both files),
# of CPU time and of wall-clock time.
#   scripts/bench-tracing-cost.sh [BUILD_DIR] [ITERS] [ROUNDS]   (build-bench 500000 7)
set -euo pipefail
Build=${1:-build-bench} Iters=${2:-500000} Rounds=${3:-7}
Vmxsim=$Build/vmxsim Image=$Build/hvm/vmx_bench.elf
for F in "$Vmxsim" "$Image"; do
  [ -e "$F" ] || { echo "bench-tracing-cost: $F missing (build $Build first: scripts/bench.sh builds build-bench)" >&2; exit 2; }
done
Work=$(mktemp -d "${TMPDIR:-/tmp}/tracing-cost.XXXXXX")
trap 'rm -rf "$Work"' EXIT
for ((R = 0; R < Rounds; ++R)); do
  for V in off gt rings all; do
    Args=() Trace=0
    case $V in
    gt) Args=(--trace-ground-truth "$Work/gt.xt") ;;
    rings) Args=(--xentrace /dev/null) Trace=1 ;;
    all) Args=(--xentrace "$Work/hv.xt" --trace-ground-truth "$Work/all-gt.xt") Trace=1 ;;
    esac
    # Every run writes new files: truncating the previous round's (0.7 GB for all's ground
    # truth) would charge the freeing of its pages to the run measured.
    rm -f "$Work/gt.xt" "$Work/hv.xt" "$Work/all-gt.xt"
    /usr/bin/time -f "$V %U %S %e" "$Vmxsim" run -q --append "iters=$Iters trace=$Trace" \
      "${Args[@]}" "$Image" >/dev/null 2>>"$Work/times" || true
  done
done
awk -v rounds="$Rounds" -v exits=$((3 * Iters + 1)) '
  NF == 4 { k = ++n[$1]; usr[$1, k] = $2; sys[$1, k] = $3; cpu[$1, k] = $2 + $3; wall[$1, k] = $4 }
  function median(arr, v,   i, j, t, a, k) {
    k = n[v]; for (i = 1; i <= k; ++i) a[i] = arr[v, i]
    for (i = 1; i <= k; ++i) for (j = i + 1; j <= k; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((k + 1) / 2)]
  }
  END {
    for (V in n) if (n[V] != rounds) { print "bench-tracing-cost: a run failed" > "/dev/stderr"; exit 1 }
    split("off gt rings all", Vs, " ")
    printf "medians of %d rounds, %d exits per run\n", rounds, exits
    printf "%-6s %7s %7s %7s %7s\n", "", "user", "system", "CPU", "wall"
    for (i = 1; i <= 4; ++i) {
      V = Vs[i]; c[V] = median(cpu, V); w[V] = median(wall, V)
      printf "%-6s %7.2f %7.2f %7.2f %7.2f s\n", V, median(usr, V), median(sys, V), c[V], w[V]
    }
    printf "CPU:  gt/off %.3f  all/rings %.3f\n", c["gt"] / c["off"], c["all"] / c["rings"]
    printf "wall: gt/off %.3f  all/rings %.3f\n", w["gt"] / w["off"], w["all"] / w["rings"]
  }' "$Work/times"
