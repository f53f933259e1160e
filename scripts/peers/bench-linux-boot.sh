#!/usr/bin/env bash
# Boots the Linux kit of scripts/fetch-guests.sh (Debian 12's kernel, the busybox
# initramfs whose /init prints its markers and powers off) on vmxsim and on QEMU TCG, in
# one sitting, pair by pair (vmxsim, QEMU, vmxsim, QEMU, ...), and prints the wall time of
# each whole boot (load to ACPI power-off, user space included) and the vmxsim/QEMU ratio.
#
#   scripts/peers/bench-linux-boot.sh [--runs N] [--smp N] [--vmxsim PATH] [--icount]
#                                     [--exec interp|translate]
#
# Both get the same kernel, initramfs, command line ("console=ttyS0"), 512 MiB and CPU
# count; QEMU runs `-accel tcg -cpu max -machine pc` with no icount (its fastest mode:
# TCG, not deterministic); with --icount each pair also boots QEMU with -icount shift=0
# (its deterministic mode) and a third column and ratio are printed. Each run must reach "vmxsim-init: done" on its serial line, or
# the script stops with status 1 naming the run. The figures are medians over the runs; the
# spread (min-max) says how noisy the machine was. --exec selects vmxsim's execution mode
# (`run --exec`; default interp). Exit status: 0, 1 (a run failed), 2
# (bad arguments or no guest cache).
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=3 smp=1 vmxsim=build-bench/vmxsim icount=0 exec=interp
while [ $# -gt 0 ]; do
  case $1 in
  --runs) runs=${2:?}; shift 2 ;;
  --smp) smp=${2:?}; shift 2 ;;
  --vmxsim) vmxsim=${2:?}; shift 2 ;;
  --icount) icount=1; shift ;;
  --exec) exec=${2:?}; shift 2 ;;
  *) echo "bench-linux-boot: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]?$ && $smp =~ ^[1-9][0-9]?$ ]] ||
  { echo "bench-linux-boot: --runs and --smp take 1..99" >&2; exit 2; }
[[ $exec == interp || $exec == translate ]] ||
  { echo "bench-linux-boot: --exec takes interp or translate" >&2; exit 2; }

cache="${VMXSIM_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmxsim/guests}"
[ -s "$cache/vmlinuz" ] && [ -s "$cache/initramfs.cpio.gz" ] ||
  { echo "bench-linux-boot: no guest cache at $cache: run scripts/fetch-guests.sh" >&2; exit 2; }
source scripts/bench-lib.sh
if [ "$vmxsim" = build-bench/vmxsim ]; then benchBuild build-bench vmxsim; fi
[ -x "$vmxsim" ] || { echo "bench-linux-boot: no vmxsim binary at $vmxsim" >&2; exit 2; }
./scripts/peers/install-qemu.sh

serial="$(mktemp)"
trap 'rm -f "$serial"' EXIT
append="console=ttyS0"

# Runs one boot; prints its wall seconds. $1 names the peer for messages.
timed() {
  local who=$1; shift
  : >"$serial"
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || true # QEMU and vmxsim both exit 0 on ACPI power-off
  t1=$(date +%s.%N)
  grep -q "vmxsim-init: done" "$serial" ||
    { echo "bench-linux-boot: the $who run did not reach user space's last marker" >&2; exit 1; }
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f\n", b - a}'
}

qemu=(qemu-system-x86_64 -nodefaults -display none -no-reboot -accel tcg -cpu max -machine pc
  -m 512 -smp "$smp" -kernel "$cache/vmlinuz" -initrd "$cache/initramfs.cpio.gz" -append "$append"
  -serial "file:$serial")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f\n", a / b}'; }
vm=() qe=() qi=() ratios=() iratios=()
for ((i = 1; i <= runs; i++)); do
  a=$(timed vmxsim "$vmxsim" run -q --exec "$exec" --kernel "$cache/vmlinuz" \
    --initrd "$cache/initramfs.cpio.gz" --append "$append" -m 512 --smp "$smp" --serial "file:$serial")
  b=$(timed QEMU "${qemu[@]}")
  vm+=("$a") qe+=("$b") ratios+=("$(ratio "$a" "$b")")
  line=$(printf 'run %d: vmxsim %.1f s, QEMU TCG %.1f s, ratio %s' "$i" "$a" "$b" "${ratios[-1]}")
  if [ "$icount" = 1 ]; then
    c=$(timed "QEMU -icount" "${qemu[@]}" -icount shift=0)
    qi+=("$c") iratios+=("$(ratio "$a" "$c")")
    line+=$(printf '; QEMU -icount shift=0 %.1f s, ratio %s' "$c" "${iratios[-1]}")
  fi
  echo "$line"
done
median() { benchMedian; }
range() { printf '%s\n' "$@" | benchRange; }
printf 'Linux boot to power-off, %d CPU(s), %d pairs: vmxsim (--exec %s) median %.1f s (%s), QEMU TCG median %.1f s (%s), ratio vmxsim/QEMU median %s\n' \
  "$smp" "$runs" "$exec" "$(printf '%s\n' "${vm[@]}" | median)" "$(range "${vm[@]}")" \
  "$(printf '%s\n' "${qe[@]}" | median)" "$(range "${qe[@]}")" "$(printf '%s\n' "${ratios[@]}" | median)"
if [ "$icount" = 1 ]; then
  printf 'Linux boot to power-off, QEMU -icount shift=0: median %.1f s (%s), ratio vmxsim/QEMU-icount median %s\n' \
    "$(printf '%s\n' "${qi[@]}" | median)" "$(range "${qi[@]}")" "$(printf '%s\n' "${iratios[@]}" | median)"
fi
