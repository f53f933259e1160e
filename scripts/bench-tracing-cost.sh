#!/usr/bin/env bash
# What tracing costs, in process CPU time and in wall-clock time. The vmx_bench image's
# exit loop (CPUID, OUT, VMCALL; 3 * ITERS + 1 exits, an exit every third guest
# instruction: the worst case) is run ROUNDS times in each of four variants, interleaved,
# and the median user, system, CPU (user + system) and wall-clock seconds of each are
# printed, with the ratios gt/off (the emulator's ground truth) and all/rings (writing
# both files) of CPU and of wall-clock time:
#   off    trace=0, no trace file
#   gt     trace=0, --trace-ground-truth FILE (the emulator records every exit and entry)
#   rings  trace=1 (the hypervisor traces every exit into its ring), --xentrace /dev/null
#   all    trace=1, --xentrace FILE and --trace-ground-truth FILE
# The two times measure different things. The trace files are written by a thread each
# (trace/async_output.h): CPU time counts those threads' work too (moving work to a
# thread never shrinks it; most of it is the kernel copying the files into the page
# cache, system time), wall-clock time is how long the run takes, the exit throughput,
# when a core is free for the writers (on a loaded machine it also counts the time other
# processes held the cores).
# Each run writes new files (the previous round's are removed before it, untimed).
# BUILD_DIRS is one build directory or several separated by ':' (each with vmxsim and
# hvm/vmx_bench.elf); with several, every round runs each build in turn (builds
# alternated, one sitting) and each build's medians are printed.
#   scripts/bench-tracing-cost.sh [BUILD_DIRS] [ITERS] [ROUNDS]   (build-bench 500000 7)
set -euo pipefail
Builds=${1:-build-bench} Iters=${2:-500000} Rounds=${3:-7}
IFS=: read -r -a BuildList <<<"$Builds"
for B in "${BuildList[@]}"; do
  for F in "$B/vmxsim" "$B/hvm/vmx_bench.elf"; do
    [ -e "$F" ] || { echo "bench-tracing-cost: $F missing (build $B first: scripts/bench.sh builds build-bench)" >&2; exit 2; }
  done
done
Work=$(mktemp -d "${TMPDIR:-/tmp}/tracing-cost.XXXXXX")
trap 'rm -rf "$Work"' EXIT
for ((R = 0; R < Rounds; ++R)); do
  for I in "${!BuildList[@]}"; do
    B=${BuildList[$I]}
    for V in off gt rings all; do
      Args=() Trace=0
      case $V in
      gt) Args=(--trace-ground-truth "$Work/gt.xt") ;;
      rings) Args=(--xentrace /dev/null) Trace=1 ;;
      all) Args=(--xentrace "$Work/hv.xt" --trace-ground-truth "$Work/all-gt.xt") Trace=1 ;;
      esac
      # Every run writes new files: truncating the previous round's (0.7 GB for all's
      # ground truth) would charge the freeing of its pages to the run measured.
      rm -f "$Work/gt.xt" "$Work/hv.xt" "$Work/all-gt.xt"
      # bash's time: milliseconds (GNU time prints hundredths), user and system of the
      # child from wait4, which count every thread of it.
      TIMEFORMAT="$I $V %3U %3S %3R"
      { time "$B/vmxsim" run -q --append "iters=$Iters trace=$Trace" "${Args[@]}" \
        "$B/hvm/vmx_bench.elf" >/dev/null 2>&1 || true; } 2>>"$Work/times"
    done
  done
done
awk -v rounds="$Rounds" -v exits=$((3 * Iters + 1)) -v builds="$Builds" '
  NF == 5 { k = ++n[$1, $2]; usr[$1, $2, k] = $3; sys[$1, $2, k] = $4; cpu[$1, $2, k] = $3 + $4; wall[$1, $2, k] = $5 }
  function median(arr, b, v,   i, j, t, a, k) {
    k = n[b, v]; for (i = 1; i <= k; ++i) a[i] = arr[b, v, i]
    for (i = 1; i <= k; ++i) for (j = i + 1; j <= k; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((k + 1) / 2)]
  }
  END {
    nb = split(builds, Bs, ":"); split("off gt rings all", Vs, " ")
    for (b = 0; b < nb; ++b) for (i = 1; i <= 4; ++i)
      if (n[b, Vs[i]] != rounds) { print "bench-tracing-cost: a run failed" > "/dev/stderr"; exit 1 }
    printf "medians of %d rounds, %d exits per run\n", rounds, exits
    for (b = 0; b < nb; ++b) {
      printf "%s\n%-6s %7s %7s %7s %7s\n", Bs[b + 1], "", "user", "system", "CPU", "wall"
      for (i = 1; i <= 4; ++i) {
        V = Vs[i]; c[V] = median(cpu, b, V); w[V] = median(wall, b, V)
        printf "%-6s %7.3f %7.3f %7.3f %7.3f s\n", V, median(usr, b, V), median(sys, b, V), c[V], w[V]
      }
      printf "CPU:  gt/off %.3f  all/rings %.3f\n", c["gt"] / c["off"], c["all"] / c["rings"]
      printf "wall: gt/off %.3f  all/rings %.3f\n", w["gt"] / w["off"], w["all"] / w["rings"]
    }
  }' "$Work/times"
