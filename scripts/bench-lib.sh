# Sourced by the benchmark scripts (bench.sh, bench-peers.sh, peers/bench-linux-boot.sh),
# from the checkout's top directory: the optimised build they measure, and the helpers
# they share for timing runs and summarising them.

# benchBuild DIR TARGET...: installs the tool set (scripts/setup.sh), configures DIR as an
# optimised (Release) build and builds TARGETs in it.
benchBuild() {
  local dir=$1; shift
  ./scripts/setup.sh
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
  ninja -C "$dir" "$@" >/dev/null
}

# benchTime OUT CMD...: runs CMD with stdout and stderr into file OUT; prints its wall
# seconds and returns CMD's exit status.
benchTime() {
  local out=$1; shift
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  "$@" >"$out" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}'
  return $rc
}

# Median and range (min-max) of the numbers on stdin, one a line.
benchMedian() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
benchRange() { sort -g | sed -n '1p;$p' | paste -sd- ; }
