#!/usr/bin/env bash
# Boots the two hypervisor kits of the guest cache (scripts/fetch-guests.sh) on vmxsim and
# on Debian's Bochs 2.7 (skylake-x model, software VMX), in one sitting, one CPU each, and
# prints the wall time of each whole boot (load to power-off) and the Bochs/vmxsim ratio:
#   KVM kit  Linux 6.1 with initramfs-kvm.cpio.gz: kvm, kvm_intel, kvm-hello's guest
#            (docs/kvm-in-linux.md), 512 MiB; done at "vmxsim-kvm: done", which must
#            follow "kvm-hello: all steps ok"
#   Xen kit  Xen 4.17 (tbuf_size=16), Linux 6.1 as PV dom0 with initramfs-xen.cpio.gz:
#            the tool stack, xentrace and the two PVH domUs (docs/xen-trace.md), 1024 MiB;
#            done at Xen's "Entering ACPI S5 state", which must follow "pvh-long:
#            poweroff" (not at the /init's last marker: on Bochs, whose UART sends at its
#            baud rate in emulated time, Xen drops part of the base64 trace dump that
#            comes before it, and the marker with it)
#
#   scripts/peers/bench-kits-boot.sh [--vmxsim PATH] [--exec interp|translate] [--kits kvm,xen]
#
# --exec selects vmxsim's execution mode (`run --exec`; default interp); --kits which kits run.
#
# Both get the same kernels, initramfs, command lines and memory; Bochs boots them from a
# GRUB rescue ISO (Bochs 2.7 cannot load a kernel itself), so its time includes its BIOS
# and GRUB (a few seconds), and is stopped once the end marker is on its COM1 file (it
# would idle on after power-off). vmxsim runs with its ground truth off and KVM's COM2
# to a file (the kit writes its ftrace output there), as docs/kvm-in-linux.md runs it.
# Bochs gets a COM2 file too. Runs: vmxsim KVM, Bochs KVM, vmxsim Xen, Bochs Xen.
#
# Exit status: 0; 1 a run did not reach its end marker (the run is named and its console
# ends are shown); 2 bad arguments, no vmxsim or no guest cache; 3 Bochs not installed.
# Environment: VMXSIM_GUEST_CACHE (default ~/.cache/vmxsim/guests), BOCHS_TIMEOUT
# (seconds, default 3600), BOCHS_IPS, BOCHS_CPU (bochs-lib.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench-lib.sh
source scripts/peers/bochs-lib.sh

vmxsim=build-bench/vmxsim exec=interp kits=kvm,xen
while [ $# -gt 0 ]; do
  case $1 in
  --vmxsim) vmxsim=${2:?}; shift 2 ;;
  --exec) exec=${2:?}; shift 2 ;;
  --kits) kits=${2:?}; shift 2 ;;
  *) echo "bench-kits-boot: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $exec == interp || $exec == translate ]] || { echo "bench-kits-boot: --exec takes interp or translate" >&2; exit 2; }
[[ $kits =~ ^(kvm|xen)(,(kvm|xen))?$ ]] || { echo "bench-kits-boot: --kits takes kvm, xen or both, comma-separated" >&2; exit 2; }
cache="${VMXSIM_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmxsim/guests}"
for f in vmlinuz initramfs-kvm.cpio.gz xen-4.17-amd64 initramfs-xen.cpio.gz; do
  [ -s "$cache/$f" ] || { echo "bench-kits-boot: no $f in the guest cache '$cache' (run scripts/fetch-guests.sh)" >&2; exit 2; }
done
if [ "$vmxsim" = build-bench/vmxsim ]; then benchBuild build-bench vmxsim; fi
[ -x "$vmxsim" ] || { echo "bench-kits-boot: no vmxsim program at $vmxsim" >&2; exit 2; }
./scripts/peers/install-bochs.sh || true
command -v bochs >/dev/null 2>&1 || { echo "bench-kits-boot: Bochs is not installed (scripts/peers/install-bochs.sh)" >&2; exit 3; }

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-kits-boot.XXXXXX")
trap 'rm -rf "$work"' EXIT

xen_cmdline="console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all dom0_mem=256M tbuf_size=16"
dom0_cmdline="console=hvc0 earlyprintk=xen"

# ok KIT CONSOLE: whether the console shows the kit's success and end, in order.
ok() {
  local good end
  case $1 in
  kvm) good="kvm-hello: all steps ok" end="vmxsim-kvm: done" ;;
  xen) good="pvh-long: poweroff" end="Entering ACPI S5 state" ;;
  esac
  tr -d '\r' <"$2" | awk -v g="$good" -v e="$end" 'index($0, g) {s = 1} s && index($0, e) {f = 1} END {exit !f}'
}

failed() { # WHO CONSOLE
  echo "bench-kits-boot: $1 did not reach its end; its console ends with:" >&2
  tail -n 5 "$2" >&2 || true
  exit 1
}

# vmxsimBoot KIT: prints the wall seconds of the kit's boot on vmxsim.
vmxsimBoot() {
  local out=$work/vmxsim-$1.txt t
  case $1 in
  kvm) t=$(benchTime "$work/vmxsim.log" "$vmxsim" run -q --exec "$exec" --kernel "$cache/vmlinuz" \
      --initrd "$cache/initramfs-kvm.cpio.gz" --append "console=ttyS0" -m 512 \
      --serial "file:$out" --serial2 "file:$work/vmxsim-com2.txt" --max-insns 14000000000) || true ;;
  xen) t=$(benchTime "$work/vmxsim.log" "$vmxsim" run -q --exec "$exec" --kernel "$cache/xen-4.17-amd64" \
      --initrd "$cache/vmlinuz $dom0_cmdline,$cache/initramfs-xen.cpio.gz" \
      --append "$xen_cmdline" -m 1024 --serial "file:$out" --max-insns 20000000000) || true ;;
  esac
  ok "$1" "$out" || failed "vmxsim's $1 kit" "$out"
  echo "$t"
}

# bochsBoot KIT: prints the wall seconds of the kit's boot on Bochs, from its start to the
# end marker on COM1.
bochsBoot() {
  local dir=$work/bochs-$1 megs
  mkdir -p "$dir/iso/boot/grub"
  case $1 in
  kvm)
    megs=512
    cp "$cache/vmlinuz" "$cache/initramfs-kvm.cpio.gz" "$dir/iso/boot/"
    printf '%s\n' 'set timeout=0' 'set default=0' 'menuentry "kvm" {' \
      '  linux /boot/vmlinuz console=ttyS0' '  initrd /boot/initramfs-kvm.cpio.gz' '  boot' '}' \
      >"$dir/iso/boot/grub/grub.cfg" ;;
  xen)
    megs=1024
    cp "$cache/xen-4.17-amd64" "$cache/vmlinuz" "$cache/initramfs-xen.cpio.gz" "$dir/iso/boot/"
    printf '%s\n' 'set timeout=0' 'set default=0' 'menuentry "xen" {' \
      "  multiboot /boot/xen-4.17-amd64 $xen_cmdline" "  module /boot/vmlinuz $dom0_cmdline" \
      '  module /boot/initramfs-xen.cpio.gz' '  boot' '}' >"$dir/iso/boot/grub/grub.cfg" ;;
  esac
  grub-mkrescue -o "$dir/kit.iso" "$dir/iso" >"$dir/grub.txt" 2>&1 || { cat "$dir/grub.txt" >&2; exit 1; }
  writeBochsrc "$dir/bochsrc" "$dir/kit.iso" "$megs" "$dir/com1.txt" "$dir/bochs.log"
  echo "com2: enabled=1, mode=file, dev=\"$dir/com2.txt\"" >>"$dir/bochsrc"
  echo c >"$dir/rc"
  : >"$dir/com1.txt"
  local t0 t1 pid
  t0=$(date +%s.%N)
  SDL_VIDEODRIVER=dummy SDL_AUDIODRIVER=dummy \
    timeout -k 10 "${BOCHS_TIMEOUT:-3600}" bochs -q -f "$dir/bochsrc" -rc "$dir/rc" \
    </dev/null >"$dir/bochs.stdout" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if ok "$1" "$dir/com1.txt"; then break; fi
    sleep 1
  done
  t1=$(date +%s.%N)
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  ok "$1" "$dir/com1.txt" || failed "Bochs' $1 kit" "$dir/com1.txt"
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}'
}

declare -A secs
for kit in ${kits//,/ }; do
  secs[$kit.vmxsim]=$(vmxsimBoot "$kit")
  echo "bench-kits-boot: $kit kit on vmxsim: ${secs[$kit.vmxsim]} s" >&2
  secs[$kit.bochs]=$(bochsBoot "$kit")
  echo "bench-kits-boot: $kit kit on Bochs: ${secs[$kit.bochs]} s" >&2
done

echo "bench-kits-boot: $(date -u +%Y-%m-%d), $(nproc) host CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); vmxsim $(git describe --always --dirty); $(bochs --help 2>&1 | grep -m1 -o 'Bochs x86 Emulator [0-9.]*' || echo Bochs)"
echo
echo "| kit (one CPU, boot to power-off, wall time) | vmxsim (--exec $exec) | Debian's Bochs 2.7 (skylake-x) | Bochs/vmxsim |"
echo "|---|---|---|---|"
declare -A name=([kvm]="KVM kit: Linux 6.1, kvm_intel, kvm-hello" [xen]="Xen kit: Xen 4.17, dom0, xentrace, 2 PVH domUs")
for kit in ${kits//,/ }; do
  awk -v n="${name[$kit]}" -v v="${secs[$kit.vmxsim]}" -v b="${secs[$kit.bochs]}" \
    'BEGIN {printf "| %s | %.1f s | %.1f s | %.2f |\n", n, v, b, b / v}'
done
