#!/usr/bin/env bash
# Boots the Xen kit of the guest cache (Debian 12's Xen 4.17 with Debian's Linux 6.1 as
# its PV dom0 and the busybox initramfs) on Bochs 2.7 (software VMX, the reference for
# Xen) and on vmxsim, with the same Xen and dom0 command lines, and compares Xen's boot
# messages: every "(XEN)" line of one console that the other lacks is listed, with the
# reason from compare-xen-bochs.reasons when a pattern there matches it. It prints both
# wall times and their ratio as well.
#   scripts/peers/compare-xen-bochs.sh [--cpus N]
#   scripts/peers/compare-xen-bochs.sh --consoles BOCHS.txt VMXSIM.txt   (compare only)
# Bochs 2.7 cannot load Multiboot modules itself: Xen, the kernel and the initramfs go on
# a GRUB rescue ISO ("multiboot"/"module" lines), built in a temporary directory.
#
# Exit status: 0 every differing line has a reason; 1 a line without one, or a run that
# did not reach Xen's boot; 2 bad arguments, no vmxsim or no guest cache (run
# scripts/fetch-guests.sh); 3 Bochs not installed (install-bochs.sh installs it).
#
# Environment:
#   VMXSIM_GUEST_CACHE  the guest cache (default ~/.cache/vmxsim/guests)
#   VMXSIM              the vmxsim program (default build-bench/vmxsim, else build/vmxsim)
#   BOCHS_TIMEOUT       seconds before Bochs is stopped (default 1800)
#   BOCHS_IPS           Bochs' instructions per emulated second (default 50000000)
#   BOCHS_CPU           Bochs cpu model (default corei7_skylake_x)
#   COMPARE_KEEP        a directory: keep both consoles and the Bochs log there
set -euo pipefail
Cpus=1 BochsConsole= VmxsimConsole=
while [ $# -gt 0 ]; do
  case $1 in
  --cpus) Cpus=${2:?}; shift 2 ;;
  --consoles) BochsConsole=${2:?}; VmxsimConsole=${3:?}; shift 3 ;;
  *) echo "usage: $0 [--cpus N] | --consoles BOCHS.txt VMXSIM.txt" >&2; exit 2 ;;
  esac
done
Here=$(cd "$(dirname "$0")" && pwd)
source "$Here/bochs-lib.sh"
Root=$(cd "$Here/../.." && pwd)
Cache=${VMXSIM_GUEST_CACHE:-$HOME/.cache/vmxsim/guests}
# Boots the kit on Bochs, then on vmxsim, and prints both wall times.
runBoth() {
for f in xen-4.17-amd64 vmlinuz initramfs.cpio.gz; do
  [ -f "$Cache/$f" ] || { echo "compare-xen-bochs: no $f in the guest cache '$Cache' (run scripts/fetch-guests.sh)" >&2; exit 2; }
done
Vmxsim=${VMXSIM:-}
if [ -z "$Vmxsim" ]; then
  for c in "$Root/build-bench/vmxsim" "$Root/build/vmxsim"; do
    [ -x "$c" ] && { Vmxsim=$c; break; }
  done
fi
[ -n "$Vmxsim" ] && [ -x "$Vmxsim" ] || { echo "compare-xen-bochs: no vmxsim program (build it, or set VMXSIM)" >&2; exit 2; }
"$Here/install-bochs.sh" || true
command -v bochs >/dev/null 2>&1 || { echo "compare-xen-bochs: Bochs is not installed (scripts/peers/install-bochs.sh)" >&2; exit 3; }

# The kit's command lines, as tests/harness/linux_boot_test.cpp boots it on vmxsim.
XenCmdline="console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all dom0_mem=256M"
Dom0Cmdline="console=hvc0 earlyprintk=xen"

mkdir -p "$Work/iso/boot/grub"
cp "$Cache/xen-4.17-amd64" "$Cache/vmlinuz" "$Cache/initramfs.cpio.gz" "$Work/iso/boot/"
cat > "$Work/iso/boot/grub/grub.cfg" <<CFG
set timeout=0
set default=0
menuentry "xen" {
  multiboot /boot/xen-4.17-amd64 $XenCmdline
  module /boot/vmlinuz $Dom0Cmdline
  module /boot/initramfs.cpio.gz
  boot
}
CFG
grub-mkrescue -o "$Work/xen.iso" "$Work/iso" >"$Work/grub.txt" 2>&1 || { cat "$Work/grub.txt" >&2; exit 1; }
BOCHS_CPUS=$Cpus writeBochsrc "$Work/bochsrc" "$Work/xen.iso" 1024 "$Work/bochs-console.txt" "$Work/bochs.log"
echo c > "$Work/rc"

# Bochs: stopped at the timeout or when the dom0 powers the machine off (Bochs then
# quits, or keeps running idle: the console is complete either way once Xen says S5).
T0=$(date +%s.%N)
SDL_VIDEODRIVER=dummy SDL_AUDIODRIVER=dummy \
  timeout -k 10 "${BOCHS_TIMEOUT:-1800}" bochs -q -f "$Work/bochsrc" -rc "$Work/rc" \
  </dev/null >"$Work/bochs.stdout" 2>&1 &
BochsPid=$! # timeout's: it passes a TERM on to Bochs
while kill -0 "$BochsPid" 2>/dev/null; do
  if grep -qs "Entering ACPI S5 state" "$Work/bochs-console.txt"; then
    sleep 2
    kill "$BochsPid" 2>/dev/null || true
    break
  fi
  sleep 1
done
wait "$BochsPid" 2>/dev/null || true
T1=$(date +%s.%N)

"$Vmxsim" run -q -m 1024 --smp "$Cpus" --kernel "$Cache/xen-4.17-amd64" \
  --initrd "$Cache/vmlinuz $Dom0Cmdline,$Cache/initramfs.cpio.gz" --append "$XenCmdline" \
  --serial "$Work/vmxsim-console.txt" --max-insns 20000000000 || true
T2=$(date +%s.%N)

BochsSecs=$(echo "$T1 - $T0" | bc)
VmxsimSecs=$(echo "$T2 - $T1" | bc)
printf 'wall time to Xen entering S5 (or the end): Bochs %.1f s, vmxsim %.1f s, ratio %.2f\n' \
  "$BochsSecs" "$VmxsimSecs" "$(echo "$BochsSecs / $VmxsimSecs" | bc -l)"
}

Work=$(mktemp -d "${TMPDIR:-/tmp}/compare-xen-bochs.XXXXXX")
cleanup() {
  if [ -n "${COMPARE_KEEP:-}" ]; then
    mkdir -p "$COMPARE_KEEP"
    cp "$Work"/*.txt "$Work"/bochs.log "$COMPARE_KEEP"/ 2>/dev/null || true
  fi
  rm -rf "$Work"
}
trap cleanup EXIT

if [ -n "$BochsConsole" ]; then
  for f in "$BochsConsole" "$VmxsimConsole"; do
    [ -f "$f" ] || { echo "compare-xen-bochs: no such console file: $f" >&2; exit 2; }
  done
  cp "$BochsConsole" "$Work/bochs-console.txt"
  cp "$VmxsimConsole" "$Work/vmxsim-console.txt"
else
  runBoth
fi

# Xen's lines, without the carriage returns; the dom0's kernel lines lose their
# timestamps.
xenLines() {
  tr -d '\r' < "$1" | grep -a '^(XEN)' | sed -e 's/[[:space:]]*$//'
}
xenLines "$Work/bochs-console.txt" > "$Work/bochs-xen.txt"
xenLines "$Work/vmxsim-console.txt" > "$Work/vmxsim-xen.txt"
if ! grep -q 'Xen version 4.17' "$Work/bochs-xen.txt"; then
  echo "compare-xen-bochs: Xen did not boot on Bochs (no version line); last console lines:" >&2
  tail -n 5 "$Work/bochs-console.txt" >&2 || true
  exit 1
fi
if ! grep -q 'Xen version 4.17' "$Work/vmxsim-xen.txt"; then
  echo "compare-xen-bochs: Xen did not boot on vmxsim (no version line)" >&2
  exit 1
fi
echo "Xen lines: Bochs $(wc -l < "$Work/bochs-xen.txt"), vmxsim $(wc -l < "$Work/vmxsim-xen.txt")"

# Each line only one side has, with its reason (the first pattern of the reasons file
# that matches, an extended regular expression; tab-separated "PATTERN<TAB>REASON").
Reasons="$Here/compare-xen-bochs.reasons"
Unexplained=0
report() { # SIDE FILE
  while IFS= read -r Line; do
    Reason=""
    while IFS=$'\t' read -r Pattern Why; do
      case $Pattern in '#'* | '') continue ;; esac
      if printf '%s\n' "$Line" | grep -Eq -- "$Pattern"; then Reason=$Why; break; fi
    done < "$Reasons"
    if [ -z "$Reason" ]; then
      Reason="NO REASON"
      Unexplained=$((Unexplained + 1))
    fi
    printf '%-6s %s\n       -> %s\n' "$1" "$Line" "$Reason"
  done < "$2"
}
diff <(sort "$Work/bochs-xen.txt" | uniq) <(sort "$Work/vmxsim-xen.txt" | uniq) \
  | sed -n 's/^< //p' > "$Work/only-bochs.txt" || true
diff <(sort "$Work/bochs-xen.txt" | uniq) <(sort "$Work/vmxsim-xen.txt" | uniq) \
  | sed -n 's/^> //p' > "$Work/only-vmxsim.txt" || true
echo "lines only on Bochs: $(wc -l < "$Work/only-bochs.txt"); only on vmxsim: $(wc -l < "$Work/only-vmxsim.txt")"
report bochs "$Work/only-bochs.txt"
report vmxsim "$Work/only-vmxsim.txt"
if [ "$Unexplained" -ne 0 ]; then
  echo "compare-xen-bochs: $Unexplained differing line(s) without a reason" >&2
  exit 1
fi
echo "compare-xen-bochs: every difference has a reason"
