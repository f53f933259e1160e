#!/usr/bin/env bash
# Fetches the real guests vmxsim is tried on, once, into a cache outside the checkout:
#
#   Debian 12's newest linux-image-6.1.0-N-amd64-unsigned  -> vmlinuz (a bzImage)
#     and from its modules: KVM (irqbypass.ko, kvm.ko, kvm-intel.ko)
#   busybox-static                                          -> busybox, and initramfs.cpio.gz
#   xen-hypervisor-4.17-amd64                               -> xen-4.17-amd64.gz and its ELF
#   (built here, with the host's gcc)                       -> initramfs-kvm.cpio.gz: busybox,
#     the KVM modules and scripts/guests/kvm-hello.c, whose /init loads KVM and tries it,
#     tracing KVM with ftrace and writing the trace to COM2 (docs/kvm-in-linux.md)
#
# Cache: $VMXSIM_GUEST_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/vmxsim/guests. Nothing
# here is ever written into the checkout, and nothing downloaded is committed.
#
# Packages come from `apt-get download`, which checks each .deb against the archive's
# signed indexes (the same trust as `apt-get install`). Only the few files needed are
# unpacked (of the kernel package's modules only the three of KVM), so the cache stays
# near 20 MB.
#
# Idempotent: when the cache is complete it only prints where things are. To fetch the
# newest versions again, delete the cache directory. The versions used are recorded in
# versions.txt in the cache (and printed). Exit status: 0 when the cache is complete,
# 1 when something could not be fetched or built (the message says what; the cache is
# left as it was: everything is built in a temporary directory and moved in at the end).
#
# Boot the result (see README, "Booting Linux"):
#   build/vmxsim run --kernel "$cache/vmlinuz" --initrd "$cache/initramfs.cpio.gz" \
#       --append "console=ttyS0" -m 512 --max-insns 2000000000 --serial file:serial.txt
# and KVM inside it (docs/kvm-in-linux.md): the same with initramfs-kvm.cpio.gz.
set -euo pipefail

cache="${VMXSIM_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmxsim/guests}"
files=(vmlinuz busybox initramfs.cpio.gz xen-4.17-amd64.gz xen-4.17-amd64
  irqbypass.ko kvm.ko kvm-intel.ko initramfs-kvm.cpio.gz versions.txt)
# The KVM modules in load order (each depends only on those before it; checked below),
# as paths under the package's /lib/modules/VERSION/kernel/.
kvm_modules=(virt/lib/irqbypass arch/x86/kvm/kvm arch/x86/kvm/kvm-intel)
# The KVM user the kvm initramfs runs: its source is in the checkout next to this script.
kvm_hello_src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/guests/kvm-hello.c"

say() { echo "fetch-guests: $*" >&2; }
die() { say "$*"; exit 1; }

# Each marker goes to the console (init's stdout: the tty on ttyS0, which Linux's 8250
# driver transmits from the UART's THRE interrupt) and to /dev/kmsg (the kernel's log,
# which it writes to the serial console by polling the UART). Then /init reads one line
# from the console for up to 2 seconds (virtual time): given `--serial-in FILE`, the line
# comes from FILE (a scripted console), else nothing arrives and it says so.
init_script="$(cat <<'EOF'
#!/bin/busybox sh
b=/bin/busybox
$b mount -t proc proc /proc
$b mount -t sysfs sysfs /sys
$b mount -t devtmpfs devtmpfs /dev 2>/dev/null
say() {
  echo "vmxsim-init: $*"
  [ -c /dev/kmsg ] && echo "vmxsim-init: $*" >/dev/kmsg
}
say "start"
say "uname -r: $($b uname -r)"
say "cpus: $($b grep -c ^processor /proc/cpuinfo)"
say "$($b grep -m 1 ^flags /proc/cpuinfo)"
if read -t 2 line; then say "console: got $line"; else say "console: no input"; fi
say "done"
$b poweroff -f
EOF
)"
# The cache is complete only for this /init: a changed script rebuilds it.
init_sum="$(printf '%s\n' "$init_script" | sha256sum | cut -d' ' -f1)"

# The kvm initramfs's /init: the same mounts and markers (prefix "vmxsim-kvm:"), then it
# loads the KVM modules in the order of /lib/modules/load-order (kvm_modules), says
# whether /dev/kvm appeared and which features kvm_intel chose (its module parameters),
# prints the kernel log's KVM lines to the console (only there: they are in the kernel
# log already), runs /bin/kvm-hello when /dev/kvm is there with KVM's ftrace events on
# (x86-tsc clock), writes that trace out through COM2 (/dev/ttyS1), and powers off.
kvm_init_script="$(cat <<'EOF'
#!/bin/busybox sh
b=/bin/busybox
$b mount -t proc proc /proc
$b mount -t sysfs sysfs /sys
$b mount -t devtmpfs devtmpfs /dev 2>/dev/null
say() {
  echo "vmxsim-kvm: $*"
  [ -c /dev/kmsg ] && echo "vmxsim-kvm: $*" >/dev/kmsg
}
say "start"
say "uname -r: $($b uname -r)"
say "$($b grep -m 1 ^flags /proc/cpuinfo)"
for m in $($b cat /lib/modules/load-order); do
  if err="$($b insmod /lib/modules/$m.ko 2>&1)"; then say "insmod $m: ok"
  else say "insmod $m: failed: $err"; fi
done
if [ -c /dev/kvm ]; then say "/dev/kvm: present"; else say "/dev/kvm: absent"; fi
p=/sys/module/kvm_intel/parameters
if [ -d $p ]; then
  l=""
  for n in ept unrestricted_guest vpid flexpriority enable_apicv enable_shadow_vmcs pml \
      preemption_timer nested; do
    [ -r $p/$n ] && l="$l $n=$($b cat $p/$n)"
  done
  say "kvm_intel:$l"
fi
$b dmesg | $b grep -i kvm | $b grep -v vmxsim-kvm: | while read -r l; do
  echo "vmxsim-kvm: dmesg: $l"
done
# KVM's own trace (docs/kvm-in-linux.md, "KVM's own trace"): ftrace's kvm events with the
# x86-tsc clock (the TSC itself, i.e. vmxsim's virtual TSC), from kvm-hello's start to its
# end, written out raw through COM2 (/dev/ttyS1; `vmxsim run --serial2 FILE`): a first
# line "# vmxsim-kvm trace_clock: <trace_clock>" (ftrace's own header does not name its
# clock), the text of the trace file, and a last line "# vmxsim-kvm trace end".
t=/sys/kernel/tracing
ev="kvm_exit kvm_entry kvm_pio kvm_mmio kvm_msr kvm_cr kvm_cpuid kvm_inj_virq"
traced=""
if [ -c /dev/kvm ] && $b mount -t tracefs tracefs $t 2>/dev/null; then
  echo 0 >$t/tracing_on
  echo x86-tsc >$t/trace_clock
  n=0
  for e in $ev; do
    if [ -w $t/events/kvm/$e/enable ]; then echo 1 >$t/events/kvm/$e/enable; n=$((n + 1))
    else say "ftrace: no event kvm:$e"; fi
  done
  : >$t/trace
  say "ftrace: $n kvm events, clock $($b cat $t/trace_clock), $($b cat $t/buffer_size_kb) KB per cpu"
  traced=1
fi
if [ -c /dev/kvm ]; then
  [ -n "$traced" ] && echo 1 >$t/tracing_on
  /bin/kvm-hello
  st=$?
  [ -n "$traced" ] && echo 0 >$t/tracing_on
  say "kvm-hello: exit status $st"
fi
if [ -n "$traced" ] && [ -c /dev/ttyS1 ]; then
  $b stty -F /dev/ttyS1 raw -echo 2>/dev/null
  {
    echo "# vmxsim-kvm trace_clock: $($b cat $t/trace_clock)"
    $b cat $t/trace
    echo "# vmxsim-kvm trace end"
  } >/dev/ttyS1
  say "ftrace: written to ttyS1, $($b grep -vc '^#' $t/trace) events"
fi
say "done"
$b poweroff -f
EOF
)"
# A changed kvm /init or kvm-hello.c rebuilds the kvm initramfs (and nothing else).
[ -f "$kvm_hello_src" ] || die "no $kvm_hello_src (run this script from its checkout)"
kvm_sum="$( (printf '%s\n' "$kvm_init_script"; cat "$kvm_hello_src") | sha256sum | cut -d' ' -f1)"

complete() {
  local f
  for f in "${files[@]}"; do [ -s "$cache/$f" ] || return 1; done
  grep -qx "init-script $init_sum" "$cache/versions.txt" &&
    grep -qx "kvm-init-script $kvm_sum" "$cache/versions.txt"
}

report() {
  cat "$cache/versions.txt"
  echo "cache: $cache"
  local f
  for f in "${files[@]}"; do echo "  $cache/$f"; done
}

mkdir -p "$cache"
# One fetch at a time per cache (CTest or CI may start two).
exec 9>"$cache/.lock"
flock 9

if complete; then
  report
  exit 0
fi

# The initramfs: busybox and an /init that prints markers and powers off. /dev/console
# comes from the kernel's built-in initramfs (usr/default_cpio_list), which is unpacked
# before this one, so no device node has to be made here (that would need root).
# build_initramfs BUSYBOX INIT ROOTDIR OUTPUT [FILE DEST]... (DEST relative to the root)
build_initramfs() {
  local root="$3" out="$4"
  mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev"
  cp "$1" "$root/bin/busybox"
  printf '%s\n' "$2" >"$root/init"
  chmod 755 "$root/init" "$root/bin/busybox"
  shift 4
  while [ $# -ge 2 ]; do
    mkdir -p "$(dirname "$root/$2")"
    cp "$1" "$root/$2"
    shift 2
  done
  # Reproducible archive: fixed times, owner root, names in sorted order.
  find "$root" -exec touch -h -d @0 {} +
  (cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
    cpio -o -H newc --quiet --owner=0:0 --reproducible) | gzip -9n >"$out"
}

# The kvm initramfs from the KVM modules in directory $1 and busybox $2, into $3 (work
# files under $4): kvm-hello is compiled here, statically, with the host's gcc.
build_kvm_initramfs() {
  command -v gcc >/dev/null || die "gcc is needed to build kvm-hello for the kvm initramfs"
  [ -f "$kvm_hello_src" ] || die "no $kvm_hello_src"
  gcc -static -O2 -o "$4/kvm-hello" "$kvm_hello_src" || die "cannot compile $kvm_hello_src"
  local extra=() m
  : >"$4/load-order"
  for m in "${kvm_modules[@]}"; do
    m="$(basename "$m")"
    extra+=("$1/$m.ko" "lib/modules/$m.ko")
    echo "$m" >>"$4/load-order"
  done
  build_initramfs "$2" "$kvm_init_script" "$4/kvm-root" "$3" "${extra[@]}" \
    "$4/load-order" lib/modules/load-order "$4/kvm-hello" bin/kvm-hello
}

# Everything is there but an /init (or kvm-hello.c) changed: rebuild only that initramfs
# from the cached busybox and modules (no download), and record it in versions.txt.
only_init_changed() {
  local f
  for f in "${files[@]}"; do [ -s "$cache/$f" ] || return 1; done
  command -v cpio >/dev/null
}
if only_init_changed; then
  work="$(mktemp -d "$cache/.work.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  cp "$cache/versions.txt" "$work/versions.txt"
  # rebuilt NAME KEY SUM: NAME was rebuilt in $work for the script whose sum is SUM.
  rebuilt() {
    local line
    line="$(cd "$work" && sha256sum "$1")"
    awk -v key="$2 " -v init="$2 $3" -v name="  $1" -v line="$line" '
      index($0, key) == 1 { print init; found = 1; next }
      substr($0, length($0) - length(name) + 1) == name { print line; next }
      { print }
      END { if (!found) print init }' "$work/versions.txt" >"$work/versions.new"
    # A versions.txt without the sha256 line of NAME gets it at the end.
    grep -q "  $1\$" "$work/versions.new" || echo "$line" >>"$work/versions.new"
    mv -f "$work/versions.new" "$work/versions.txt"
  }
  if ! grep -qx "init-script $init_sum" "$cache/versions.txt"; then
    say "the /init script changed: rebuilding initramfs.cpio.gz"
    build_initramfs "$cache/busybox" "$init_script" "$work/root" "$work/initramfs.cpio.gz"
    rebuilt initramfs.cpio.gz init-script "$init_sum"
  fi
  if ! grep -qx "kvm-init-script $kvm_sum" "$cache/versions.txt"; then
    say "the kvm /init or kvm-hello.c changed: rebuilding initramfs-kvm.cpio.gz"
    build_kvm_initramfs "$cache" "$cache/busybox" "$work/initramfs-kvm.cpio.gz" "$work"
    rebuilt initramfs-kvm.cpio.gz kvm-init-script "$kvm_sum"
  fi
  for f in initramfs.cpio.gz initramfs-kvm.cpio.gz versions.txt; do
    [ -f "$work/$f" ] && mv -f "$work/$f" "$cache/$f"
  done
  report
  exit 0
fi

# Tools: apt-get/dpkg-deb/gzip are part of every Debian system; cpio is installed here
# the way scripts/setup.sh installs build dependencies (only when missing). It is a
# guest-building tool, not a build dependency, so setup.sh leaves it out.
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg-query -W -f='${Status}' cpio 2>/dev/null | grep -q "install ok installed"; then
  say "installing cpio"
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends cpio >/dev/null
fi

kernel_pattern='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$'
newest_kernel() {
  apt-cache search --names-only "$kernel_pattern" | awk '{print $1}' | sort -V | tail -n 1
}
kpkg="$(newest_kernel)"
if [ -z "$kpkg" ] || ! apt-cache show busybox-static xen-hypervisor-4.17-amd64 >/dev/null 2>&1; then
  say "updating the package lists"
  $sudo apt-get update -qq >/dev/null || die "apt-get update failed"
  kpkg="$(newest_kernel)"
fi
[ -n "$kpkg" ] || die "no package matches $kernel_pattern (is this Debian 12 with bookworm in its sources?)"
pkgs=("$kpkg" busybox-static xen-hypervisor-4.17-amd64)

work="$(mktemp -d "$cache/.work.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# As root, apt-get would drop to the _apt user for the download, who cannot write into a
# cache under root's home: download as root (verification against the signed indexes is
# the same either way).
apt_opts=(-q)
[ "$(id -u)" -eq 0 ] && apt_opts+=(-o APT::Sandbox::User=root)
say "downloading ${pkgs[*]}"
(cd "$work" && apt-get "${apt_opts[@]}" download "${pkgs[@]}" >/dev/null) ||
  die "apt-get download failed"

deb() { ls "$work"/"$1"_*.deb 2>/dev/null | head -n 1; }
# Unpacks only the members matching the given patterns, into $work/x.
extract() {
  local d="$1"; shift
  mkdir -p "$work/x"
  dpkg-deb --fsys-tarfile "$d" | tar -x -C "$work/x" --wildcards "$@" ||
    die "cannot unpack $* from $(basename "$d")"
}
kdeb="$(deb "$kpkg")"; bdeb="$(deb busybox-static)"; xdeb="$(deb xen-hypervisor-4.17-amd64)"
[ -n "$kdeb" ] && [ -n "$bdeb" ] && [ -n "$xdeb" ] || die "a package is missing after download"

extract "$kdeb" './boot/vmlinuz-*'
for m in "${kvm_modules[@]}"; do
  # Debian 12's modules are plain .ko; a compressed one is unpacked below.
  extract "$kdeb" "./lib/modules/*/kernel/$m.ko*"
done
extract "$bdeb" './bin/busybox'
extract "$xdeb" './boot/xen-4.17-amd64.gz'
out="$work/out"
mkdir -p "$out"
vmlinuz=("$work"/x/boot/vmlinuz-*)
[ -f "${vmlinuz[0]}" ] || die "no /boot/vmlinuz-* in $(basename "$kdeb")"
cp "${vmlinuz[0]}" "$out/vmlinuz"
cp "$work/x/bin/busybox" "$out/busybox"
cp "$work/x/boot/xen-4.17-amd64.gz" "$out/xen-4.17-amd64.gz"
gzip -dc "$out/xen-4.17-amd64.gz" >"$out/xen-4.17-amd64"
kver="$(basename "${vmlinuz[0]}")"; kver="${kver#vmlinuz-}"

# The KVM modules, uncompressed (busybox's insmod reads plain ELF only), each checked to
# depend only on those loaded before it (the "depends=" entry of its .modinfo section).
loaded=""
for m in "${kvm_modules[@]}"; do
  name="$(basename "$m").ko"
  ko=("$work/x/lib/modules/$kver/kernel/$m".ko*)
  [ -f "${ko[0]}" ] || die "no $m.ko* for kernel $kver in $(basename "$kdeb")"
  case "${ko[0]}" in
    *.ko) cp "${ko[0]}" "$out/$name" ;;
    *.ko.xz) xz -dc "${ko[0]}" >"$out/$name" || die "cannot decompress ${ko[0]##*/}" ;;
    *.ko.zst) zstd -qdc "${ko[0]}" >"$out/$name" || die "cannot decompress ${ko[0]##*/}" ;;
    *) die "unknown module compression: ${ko[0]##*/}" ;;
  esac
  deps="$(tr '\0' '\n' <"$out/$name" | grep -a -m 1 '^depends=' | cut -d= -f2)" || true
  for d in ${deps//,/ }; do
    case " $loaded " in *" ${d//_/-} "*) ;; *) die "$name needs $d, which is not loaded before it" ;; esac
  done
  loaded+=" $(basename "$m")"
done

build_initramfs "$out/busybox" "$init_script" "$work/root" "$out/initramfs.cpio.gz"
build_kvm_initramfs "$out" "$out/busybox" "$out/initramfs-kvm.cpio.gz" "$work"

ver() { dpkg-deb -f "$1" Version; }
{
  echo "# vmxsim guests, fetched $(date -u +%Y-%m-%d) with apt-get download (Debian 12)"
  echo "$kpkg $(ver "$kdeb") kernel $kver"
  echo "busybox-static $(ver "$bdeb")"
  echo "xen-hypervisor-4.17-amd64 $(ver "$xdeb")"
  echo "init-script $init_sum"
  echo "kvm-init-script $kvm_sum"
  (cd "$out" && sha256sum vmlinuz busybox initramfs.cpio.gz xen-4.17-amd64.gz xen-4.17-amd64 \
    irqbypass.ko kvm.ko kvm-intel.ko initramfs-kvm.cpio.gz)
} >"$out/versions.txt"

for f in "${files[@]}"; do mv -f "$out/$f" "$cache/$f"; done
report
