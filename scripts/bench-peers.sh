#!/usr/bin/env bash
# vmxsim against its peers, in one sitting: the same images on vmxsim, on QEMU 7.2 TCG with
# -icount shift=0 (deterministic) and without (its fastest mode), and on Debian's Bochs 2.7
# (the other software VMX), and one table of rates and vmxsim/peer ratios.
#
#   scripts/bench-peers.sh [--runs N] [--build DIR] [--exec interp|translate] [--no-bochs]
#                          [--linux] [--kits]
#
# Workloads (hvm/images; each figure is the difference of a small and a large run of the
# same image on the same peer, so boot and firmware time cancel out):
#   integer loop   loop.elf iters=0 vs iters=N: 5N instructions (MIPS)
#   port writes    loop.elf out=1 iters=0 vs out=1 iters=N: 5N instructions, N of them
#                  OUT to port 0x80 (MIPS)
#   compiled C     selftest.elf rounds=1 vs rounds=N: N - 1 more rounds of the selftest
#                  suite, each of the instructions vmxsim counts for one round (MIPS; a
#                  peer that skips a test runs slightly different instructions)
#   VM exits       vmx_bench.elf iters=0 vs iters=N: 3N exit+entry round trips (exits/s;
#                  vmxsim and Bochs only: QEMU TCG has no VMX)
#   --linux        the Linux boot kit (scripts/peers/bench-linux-boot.sh --icount: wall time
#                  to power-off, vmxsim, QEMU TCG and QEMU -icount)
#   --kits         the KVM kit and the Xen kit (scripts/peers/bench-kits-boot.sh: wall time
#                  to power-off on vmxsim and on Bochs 2.7, one boot each, and the ratio)
# Runs are interleaved: each round runs every workload on vmxsim and then on each peer, so
# a noisy machine slows both sides of a ratio alike; ratios are taken within a round. The
# table gives medians over the rounds with their range (min-max). Each run must end the
# way the image does on success, or the script stops with status 1 naming it.
#
# --exec selects vmxsim's execution mode (`run --exec`, default interp) for every vmxsim run,
# the boot kits' included. --build DIR measures the vmxsim and images of DIR as they are (an optimised build other
# than build-bench, which is configured and brought up to date first). Exit status: 0, 1
# (a run failed), 2 (bad arguments or no such build).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh

runs=5 build=build-bench bochs=1 linux=0 kits=0 exec=interp
while [ $# -gt 0 ]; do
  case $1 in
  --runs) runs=${2:?}; shift 2 ;;
  --build) build=${2:?}; shift 2 ;;
  --exec) exec=${2:?}; shift 2 ;;
  --no-bochs) bochs=0; shift ;;
  --linux) linux=1; shift ;;
  --kits) kits=1; shift ;;
  *) echo "bench-peers: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]?$ ]] || { echo "bench-peers: --runs takes 1..99" >&2; exit 2; }
[[ $exec == interp || $exec == translate ]] || { echo "bench-peers: --exec takes interp or translate" >&2; exit 2; }

if [ "$build" = build-bench ]; then benchBuild build-bench vmxsim vmxsim_images; fi
for f in vmxsim hvm/loop.elf hvm/selftest.elf hvm/vmx_bench.elf; do
  [ -e "$build/$f" ] || { echo "bench-peers: no $build/$f" >&2; exit 2; }
done
./scripts/peers/install-qemu.sh
if [ "$bochs" = 1 ]; then ./scripts/peers/install-bochs.sh; fi
vmxsim=$build/vmxsim images=$build/hvm

# Iterations of the large run, per workload and peer: about a second of work each.
declare -A iters=(
  [loop.vmxsim]=40000000 [loop.qemu-icount]=200000000 [loop.qemu]=600000000
  [loop.bochs]=20000000
  [out.vmxsim]=10000000 [out.qemu-icount]=10000000 [out.qemu]=10000000 [out.bochs]=4000000
  [exits.vmxsim]=500000 [exits.bochs]=100000
  [c.vmxsim]=100 [c.qemu-icount]=100 [c.qemu]=100 [c.bochs]=10
)
peers=(vmxsim qemu-icount qemu)
if [ "$bochs" = 1 ]; then peers+=(bochs); fi
declare -A title=([vmxsim]="vmxsim --exec $exec" [qemu-icount]="QEMU TCG -icount shift=0" [qemu]="QEMU TCG"
  [bochs]="Bochs 2.7")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-peers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# command PEER IMAGE APPEND: sets cmd to the command line that runs IMAGE on PEER.
command_for() {
  local image=$images/$2.elf
  case $1 in
  vmxsim) cmd=("$vmxsim" run -q --exec "$exec" "$image" --append "$3") ;;
  qemu | qemu-icount)
    cmd=(qemu-system-x86_64 -nodefaults -display none -no-reboot -serial null
      -device isa-debug-exit,iobase=0xf4,iosize=4 -cpu max -kernel "$image" -append "$3")
    if [ "$1" = qemu-icount ]; then cmd+=(-icount shift=0); fi ;;
  bochs) cmd=(./scripts/peers/run-bochs.sh "$image" "$3") ;;
  esac
}

# run PEER IMAGE APPEND MARKER: runs once, checks that it succeeded (vmxsim and QEMU: exit
# status 1, i.e. isa-debug-exit 0; Bochs: status 0 and MARKER on the UART), prints seconds.
run() {
  local out=$tmp/out rc=0 t
  command_for "$1" "$2" "$3"
  t=$(benchTime "$out" "${cmd[@]}") || rc=$?
  if { [ "$1" = bochs ] && { [ "$rc" != 0 ] || ! grep -q "$4" "$out"; }; } ||
    { [ "$1" != bochs ] && [ "$rc" != 1 ]; }; then
    echo "bench-peers: ${cmd[*]} failed (status $rc); its output ends with:" >&2
    tail -n 5 "$out" >&2
    exit 1
  fi
  echo "$t"
}

# vmxsim's retired-instruction count of one run (its run summary on stderr; a guest exit
# with 0 is status 1).
retired() {
  local out
  out=$("$vmxsim" run "$images/$1.elf" --append "$2" 2>&1 >/dev/null) || true
  sed -n 's/.* \([0-9][0-9]*\) instructions, .*/\1/p' <<<"$out" | head -1
}

# The work of one measurement: name, small image/append, large image/append, the success
# marker, and how to turn the large run's iterations into units (instructions or exits).
selftest_insns=$(($(retired selftest rounds=2) - $(retired selftest rounds=1)))
[ "$selftest_insns" -gt 0 ] || { echo "bench-peers: no instruction count from vmxsim's summary" >&2; exit 1; }

# measure WORKLOAD PEER: prints the rate (units per second) of one small/large pair.
measure() {
  local w=$1 p=$2 n=${iters[$1.$2]:-0} a b units
  case $w in
  loop) a=$(run "$p" loop iters=0 "loop: done"); b=$(run "$p" loop "iters=$n" "loop: done")
    units=$((5 * n)) ;;
  out) a=$(run "$p" loop "out=1 iters=0" "loop: done"); b=$(run "$p" loop "out=1 iters=$n" "loop: done")
    units=$((5 * n)) ;;
  c) a=$(run "$p" selftest rounds=1 "selftest: "); b=$(run "$p" selftest "rounds=$n" "selftest: ")
    units=$(((n - 1) * selftest_insns)) ;;
  exits) a=$(run "$p" vmx_bench iters=0 "vmx_bench: done"); b=$(run "$p" vmx_bench "iters=$n" "vmx_bench: done")
    units=$((3 * n)) ;;
  esac
  awk -v a="$a" -v b="$b" -v u="$units" 'BEGIN {d = b - a; printf "%.6g\n", (d > 0 ? u / d : 0)}'
}

workloads=(loop out c exits)
declare -A wtitle=([loop]="integer loop (MIPS)" [out]="port-write loop (MIPS)"
  [c]="compiled C, selftest (MIPS)" [exits]="VM exit+entry round trips (M/s)")
declare -A rates ratios
for ((r = 1; r <= runs; r++)); do
  for w in "${workloads[@]}"; do
    for p in "${peers[@]}"; do
      [ "$w" = exits ] && [[ $p == qemu* ]] && continue
      x=$(measure "$w" "$p")
      rates[$w.$p]+="$x "
      if [ "$p" = vmxsim ]; then v=$x; else
        ratios[$w.$p]+="$(awk -v a="$v" -v b="$x" 'BEGIN {printf "%.4f", (b > 0 ? a / b : 0)}') "
      fi
    done
  done
  echo "bench-peers: round $r of $runs done" >&2
done

scale() { # rates to the table's unit: millions per second, three significant digits
  awk '{printf "%.3g\n", $1 / 1e6}'
}
cell() { # "median (min-max)" of the numbers in $1, through filter $2
  local xs; xs=$(printf '%s\n' $1 | $2)
  printf '%s (%s)' "$(benchMedian <<<"$xs")" "$(benchRange <<<"$xs")"
}
ident() { awk '{printf "%.3f\n", $1}'; }

echo "bench-peers: $(date -u +%Y-%m-%d), $(nproc) host CPUs, $runs rounds; medians (min-max)"
echo "$(qemu-system-x86_64 --version | head -1); vmxsim $(git describe --always --dirty)"
header="| workload | ${title[vmxsim]}"
sep="|---|---"
for p in "${peers[@]:1}"; do header+=" | ${title[$p]} | vmxsim/${title[$p]}"; sep+="|---|---"; done
echo; echo "$header |"; echo "$sep|"
for w in "${workloads[@]}"; do
  line="| ${wtitle[$w]} | $(cell "${rates[$w.vmxsim]}" scale)"
  for p in "${peers[@]:1}"; do
    if [ -n "${rates[$w.$p]:-}" ]; then
      line+=" | $(cell "${rates[$w.$p]}" scale) | $(cell "${ratios[$w.$p]}" ident)"
    else
      line+=" | - | -"
    fi
  done
  echo "$line |"
done
echo
echo "Commands (each figure: the large run's time minus the small run's):"
for w in "${workloads[@]}"; do
  for p in "${peers[@]}"; do
    [ "$w" = exits ] && [[ $p == qemu* ]] && continue
    n=${iters[$w.$p]:-0}
    case $w in
    loop) s=(loop iters=0) l=(loop "iters=$n") ;;
    out) s=(loop "out=1 iters=0") l=(loop "out=1 iters=$n") ;;
    c) s=(selftest rounds=1) l=(selftest "rounds=$n") ;;
    exits) s=(vmx_bench iters=0) l=(vmx_bench "iters=$n") ;;
    esac
    command_for "$p" "${l[@]}"; large="${cmd[*]}"
    command_for "$p" "${s[@]}"; small="${cmd[*]}"
    echo "- ${wtitle[$w]}, ${title[$p]}: \`$large\` minus \`$small\`"
  done
done
echo "- compiled C: $selftest_insns instructions a round (vmxsim's retired count of selftest.elf rounds=2 minus rounds=1)"

if [ "$linux" = 1 ]; then
  echo
  ./scripts/peers/bench-linux-boot.sh --runs "$runs" --vmxsim "$vmxsim" --exec "$exec" --icount
fi
if [ "$kits" = 1 ]; then
  echo
  ./scripts/peers/bench-kits-boot.sh --vmxsim "$vmxsim" --exec "$exec"
fi
