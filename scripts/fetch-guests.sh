#!/usr/bin/env bash
# Fetches the real guests vmxsim is tried on, once, into a cache outside the checkout:
#
#   Debian 12's newest linux-image-6.1.0-N-amd64-unsigned  -> vmlinuz (a bzImage)
#     and from its modules: KVM (irqbypass.ko, kvm.ko, kvm-intel.ko)
#   busybox-static                                          -> busybox, and initramfs.cpio.gz
#   xen-hypervisor-4.17-amd64                               -> xen-4.17-amd64.gz and its ELF
#   xen-hypervisor-4.17-amd64-dbg (the same version)        -> xen-syms-4.17-amd64: Xen's
#     symbol file, for `vmxsim run --xen-trace FILE --xen-syms FILE` (docs/xen-trace.md)
#   (built here, with the host's gcc)                       -> initramfs-kvm.cpio.gz: busybox,
#     the KVM modules and scripts/guests/kvm-hello.c, whose /init loads KVM and tries it,
#     tracing KVM with ftrace and writing the trace to COM2 (docs/kvm-in-linux.md)
#   (built here, the Xen kit)                                -> initramfs-xen.cpio.gz: busybox,
#     the dom0 Xen modules (xen-evtchn, xen-privcmd, xenfs, xen-gntdev, xen-gntalloc),
#     xen-utils-4.17's xl, xenstored, xentrace and xen-init-dom0 with their shared
#     libraries (Debian's, ld.so and libc included), and two tiny PVH guests built from
#     scripts/guests/pvh-hello.S (32-bit) and pvh-long.S (64-bit); its /init starts the
#     tool stack, runs both as domUs, one after the other, under xentrace and writes Xen's
#     trace out on the console (docs/xen-trace.md); initramfs-xen-drain.cpio.gz, the same
#     without xentrace, for vmxsim's own drain of Xen's buffers
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
  [ -s "$cache/initramfs-xen.cpio.gz" ] && echo "  $cache/initramfs-xen.cpio.gz"
  [ -s "$cache/initramfs-xen-drain.cpio.gz" ] && echo "  $cache/initramfs-xen-drain.cpio.gz"
  [ -s "$cache/xen-syms-4.17-amd64" ] && echo "  $cache/xen-syms-4.17-amd64"
  return 0
}

mkdir -p "$cache"
# One fetch at a time per cache (CTest or CI may start two).
exec 9>"$cache/.lock"
flock 9


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

# --- The Xen kit (docs/xen-trace.md): initramfs-xen.cpio.gz, built after the rest, from
# its own downloads, so a cache without it gains it without touching the files above.
# Its /init (prefix "vmxsim-xen:") loads the dom0 Xen modules, mounts xenfs, starts
# xenstored, xen-init-dom0 and xenconsoled (what Debian's xencommons does), starts
# xentrace on the HVM and scheduler classes (0x000af000), runs pvh-hello and then pvh-long
# as PVH domUs with `xl create -F` (in the foreground until the domain is gone), stops
# xentrace, and writes its file out on the console (hvc0, which Xen writes to COM1) in
# base64, between the lines
#   vmxsim-xentrace: begin BYTES SHA256
#   vmxsim-xentrace: end
# with the kernel's console messages silenced first (dmesg -n 1), so that nothing else
# lands inside; `vmxsim trace import --xen-console` turns it back into the XenTrace file.
# initramfs-xen-drain.cpio.gz is the same kit without xentrace (xen_drain_init_script,
# below): vmxsim drains Xen's buffers itself (`vmxsim run --xen-trace`, docs/xen-trace.md).
xen_init_script="$(cat <<'EOF'
#!/bin/busybox sh
b=/bin/busybox
export PATH=/usr/lib/xen-4.17/bin:/bin LD_LIBRARY_PATH=/lib
$b mount -t proc proc /proc
$b mount -t sysfs sysfs /sys
$b mount -t devtmpfs devtmpfs /dev 2>/dev/null
$b mkdir -p /dev/pts
$b mount -t devpts devpts /dev/pts
$b mount -t tmpfs tmpfs /tmp
$b mount -t tmpfs tmpfs /var/run
$b mkdir -p /var/run/xen /var/run/xenstored /var/lib/xen /var/lib/xenstored /var/log/xen /var/lock
say() {
  echo "vmxsim-xen: $*"
  [ -c /dev/kmsg ] && echo "vmxsim-xen: $*" >/dev/kmsg
}
say "start"
say "uname -r: $($b uname -r)"
for m in $($b cat /lib/modules/load-order); do
  if err="$($b insmod /lib/modules/$m.ko 2>&1)"; then say "insmod $m: ok"
  else say "insmod $m: failed: $err"; fi
done
if $b mount -t xenfs xenfs /proc/xen; then say "xenfs: $($b cat /proc/xen/capabilities)"
else say "xenfs: mount failed"; fi
if xenstored --pid-file /var/run/xenstored.pid; then say "xenstored: started"
else say "xenstored: failed to start"; fi
ok=""
for i in 1 2 3 4 5; do
  if out="$(xen-init-dom0 2>&1)"; then ok=1; break; fi
  $b sleep 1
done
if [ -n "$ok" ]; then say "xen-init-dom0: ok"; else say "xen-init-dom0: failed: $out"; fi
# xl waits for the domU's console to get its tty, which xenconsoled gives it (a pty:
# devpts is mounted above).
$b mkdir -p /var/log/xen/console
if xenconsoled --pid-file=/var/run/xenconsoled.pid; then say "xenconsoled: started"
else say "xenconsoled: failed to start"; fi
# Xen traces from boot (tbuf_size=16 on its command line: 16 pages a CPU, all classes)
# until the buffers are full; xentrace reads what they hold, then the HVM and scheduler
# classes only (0x0008f000 | 0x0002f000: exits, entries, handler records, and which vCPU
# runs).
xentrace -S 16 -e 0x000af000 /tmp/xen.trace &
xt=$!
$b sleep 1
say "xentrace: started"
for g in pvh-hello pvh-long; do
  xl create -F /etc/xen/$g.cfg >/tmp/xl.log 2>&1
  say "xl create $g: exit status $?"
  $b sed 's/^/vmxsim-xen: xl: /' /tmp/xl.log
done
$b kill -INT $xt
wait $xt
say "xentrace: exit status $?"
n=$($b stat -c %s /tmp/xen.trace 2>/dev/null || echo 0)
sum=$($b sha256sum /tmp/xen.trace 2>/dev/null | $b cut -d' ' -f1)
say "xentrace: $n bytes"
$b dmesg -n 1
echo "vmxsim-xentrace: begin $n $sum"
$b base64 /tmp/xen.trace
echo "vmxsim-xentrace: end"
say "done"
$b poweroff -f
EOF
)"
# The drain kit's /init: the same without xentrace's lines (from its start to the line
# "xentrace: started", and from stopping it to the end of its file on the console).
xen_drain_sed='/^xentrace -S /,/^say "xentrace: started"$/c\
say "xentrace: not started (vmxsim drains Xen'"'"'s buffers)"
/^\$b kill -INT \$xt$/,/^echo "vmxsim-xentrace: end"$/d'
xen_drain_init_script="$(printf '%s\n' "$xen_init_script" | sed "$xen_drain_sed")"
# The domUs, one after the other: pvh-hello (32-bit) and pvh-long (64-bit), each a PVH
# guest of 8 MiB and one vCPU, destroyed when it powers off. xen_domu_cfg NAME prints the
# configuration of NAME.
xen_domu_cfg() {
  cat <<EOF
name = "$1"
type = "pvh"
kernel = "/lib/xen/$1"
memory = 8
vcpus = 1
on_poweroff = "destroy"
on_reboot = "destroy"
on_crash = "destroy"
EOF
}
# xl's own settings: dom0's memory is fixed by dom0_mem, so no ballooning.
xen_xl_conf='autoballoon="off"'
guests_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/guests"
pvh_src="$guests_dir/pvh-hello.S"
pvh_long_src="$guests_dir/pvh-long.S"
pvh_lds="$guests_dir/pvh-hello.ld"
# The packages the tools and their libraries come from (Debian 12), and what is taken.
xen_tool_pkgs=(xen-utils-4.17 libxenmisc4.17 libxenstore4 libxentoollog1 libxentoolcore1
  libxencall1 libxenevtchn1 libxenforeignmemory1 libxengnttab1 libxendevicemodel1
  libxenhypfs1 libyajl2 libc6 libgcc-s1 liblzma5 libuuid1 libzstd1 zlib1g)
xen_tools=(xl xenstored xenconsoled xentrace xen-init-dom0)
# Loaded with dlopen, so not in any NEEDED list: glibc's pthread_cancel (xl) needs it.
xen_dlopen_libs=(libgcc_s.so.1)
# dom0's Xen device modules (Debian's 6.1 builds them as modules; xenbus is built in), in
# load order: xenfs needs xen-privcmd (checked below, as for KVM).
xen_modules=(drivers/xen/xen-evtchn drivers/xen/xen-privcmd drivers/xen/xenfs/xenfs
  drivers/xen/xen-gntdev drivers/xen/xen-gntalloc)
xen_sum="$( (printf '%s\n' "$xen_init_script" "$xen_drain_init_script" "$(xen_domu_cfg NAME)" "$xen_xl_conf" \
  "${xen_tool_pkgs[*]}" "${xen_tools[*]}" "${xen_dlopen_libs[*]}" "${xen_modules[*]}"
  cat "$pvh_src" "$pvh_long_src" "$pvh_lds") | sha256sum | cut -d' ' -f1)"

xen_kit_complete() {
  [ -s "$cache/initramfs-xen.cpio.gz" ] && [ -s "$cache/initramfs-xen-drain.cpio.gz" ] &&
    grep -qx "xen-kit-script $xen_sum" "$cache/versions.txt"
}

# Builds initramfs-xen.cpio.gz into the cache and records it in versions.txt. The modules
# come from the kernel package of the cached vmlinuz (its name and version are in
# versions.txt), downloaded again for them.
build_xen_kit() {
  local w line kpkg kdebver kver d f n p todo seen
  [ -f "$pvh_src" ] && [ -f "$pvh_long_src" ] && [ -f "$pvh_lds" ] ||
    die "no $pvh_src, $pvh_long_src or $pvh_lds"
  command -v gcc >/dev/null && command -v ld >/dev/null && command -v readelf >/dev/null ||
    die "gcc, ld and readelf are needed to build the Xen kit"
  line="$(grep -E '^linux-image-.* kernel ' "$cache/versions.txt" | head -n 1)"
  read -r kpkg kdebver _ kver <<<"$line"
  [ -n "$kver" ] || die "versions.txt does not name the kernel package"
  w="$(mktemp -d "$cache/.xenkit.XXXXXX")"
  trap 'rm -rf "$w"' EXIT
  say "the Xen kit: downloading ${xen_tool_pkgs[*]} and $kpkg=$kdebver (for its Xen modules)"
  local opts=(-q)
  [ "$(id -u)" -eq 0 ] && opts+=(-o APT::Sandbox::User=root)
  (cd "$w" && apt-get "${opts[@]}" download "${xen_tool_pkgs[@]}" "$kpkg=$kdebver" >/dev/null) ||
    die "apt-get download of the Xen kit's packages failed"
  mkdir -p "$w/x" "$w/root/lib/modules" "$w/root/lib64" "$w/root/usr/lib/xen-4.17/bin" \
    "$w/root/etc/xen" "$w/root/lib/xen" "$w/root/tmp" "$w/root/var/run"
  for p in "${xen_tool_pkgs[@]}"; do
    d="$(ls "$w/${p}"_*.deb 2>/dev/null | head -n 1)"
    [ -n "$d" ] || die "$p is missing after download"
    dpkg-deb -x "$d" "$w/x" || die "cannot unpack $(basename "$d")"
  done
  d="$(ls "$w/${kpkg}"_*.deb | head -n 1)"
  : >"$w/root/lib/modules/load-order"
  local loaded=""
  for m in "${xen_modules[@]}"; do
    dpkg-deb --fsys-tarfile "$d" | tar -x -C "$w/x" "./lib/modules/$kver/kernel/$m.ko" ||
      die "no $m.ko for $kver in $(basename "$d")"
    n="$(basename "$m")"
    cp "$w/x/lib/modules/$kver/kernel/$m.ko" "$w/root/lib/modules/$n.ko"
    deps="$(tr '\0' '\n' <"$w/root/lib/modules/$n.ko" | grep -a -m 1 '^depends=' | cut -d= -f2)" || true
    for dep in ${deps//,/ }; do
      case " $loaded " in *" ${dep//_/-} "*) ;; *) die "$n.ko needs $dep, which is not loaded before it" ;; esac
    done
    loaded+=" $n"
    echo "$n" >>"$w/root/lib/modules/load-order"
  done
  # The tools and the closure of their NEEDED libraries, all from the packages.
  todo=()
  for f in "${xen_tools[@]}"; do
    [ -f "$w/x/usr/lib/xen-4.17/bin/$f" ] || die "xen-utils-4.17 has no $f"
    cp "$w/x/usr/lib/xen-4.17/bin/$f" "$w/root/usr/lib/xen-4.17/bin/$f"
    todo+=("$w/x/usr/lib/xen-4.17/bin/$f")
  done
  seen=" "
  for n in "${xen_dlopen_libs[@]}"; do
    p="$(find "$w/x/lib" "$w/x/usr/lib" -name "$n" 2>/dev/null | head -n 1)"
    [ -n "$p" ] || die "the Xen kit needs $n, which none of its packages has"
    cp -L "$p" "$w/root/lib/$n"
    todo+=("$p")
  done
  while [ ${#todo[@]} -gt 0 ]; do
    f="${todo[0]}"; todo=("${todo[@]:1}")
    for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      case "$seen" in *" $n "*) continue ;; esac
      seen+="$n "
      p="$(find "$w/x/lib" "$w/x/usr/lib" -name "$n" 2>/dev/null | head -n 1)"
      [ -n "$p" ] || die "the Xen kit needs $n, which none of its packages has"
      cp -L "$p" "$w/root/lib/$n"
      todo+=("$p")
    done
  done
  cp -L "$w/x/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$w/root/lib64/" ||
    die "libc6 has no ld-linux-x86-64.so.2"
  # pvh-hello: 32-bit code, assembled and linked without any library.
  gcc -m32 -c -o "$w/pvh-hello.o" "$pvh_src" &&
    ld -m elf_i386 -static -nostdlib --build-id=none --no-warn-rwx-segments -T "$pvh_lds" \
      -o "$w/root/lib/xen/pvh-hello" "$w/pvh-hello.o" || die "cannot build pvh-hello"
  # pvh-long: 32-bit code at its entry, 64-bit code after, in an ELF64 file.
  gcc -c -o "$w/pvh-long.o" "$pvh_long_src" &&
    ld -m elf_x86_64 -static -nostdlib --build-id=none --no-warn-rwx-segments -T "$pvh_lds" \
      -o "$w/root/lib/xen/pvh-long" "$w/pvh-long.o" || die "cannot build pvh-long"
  for n in pvh-hello pvh-long; do xen_domu_cfg "$n" >"$w/root/etc/xen/$n.cfg"; done
  printf '%s\n' "$xen_xl_conf" >"$w/root/etc/xen/xl.conf"
  build_initramfs "$cache/busybox" "$xen_init_script" "$w/root" "$w/initramfs-xen.cpio.gz"
  build_initramfs "$cache/busybox" "$xen_drain_init_script" "$w/root" \
    "$w/initramfs-xen-drain.cpio.gz"
  local vers=""
  for p in xen-utils-4.17 libc6; do
    vers+=" $p $(dpkg-deb -f "$(ls "$w/${p}"_*.deb | head -n 1)" Version)"
  done
  # versions.txt: the kit's lines replaced (or added at the end).
  grep -v -e '^xen-kit-script ' -e '^xen-kit ' -e '  initramfs-xen.cpio.gz$' \
    -e '  initramfs-xen-drain.cpio.gz$' "$cache/versions.txt" >"$w/versions.txt"
  {
    echo "xen-kit${vers}"
    echo "xen-kit-script $xen_sum"
    (cd "$w" && sha256sum initramfs-xen.cpio.gz initramfs-xen-drain.cpio.gz)
  } >>"$w/versions.txt"
  mv -f "$w/initramfs-xen.cpio.gz" "$cache/initramfs-xen.cpio.gz"
  mv -f "$w/initramfs-xen-drain.cpio.gz" "$cache/initramfs-xen-drain.cpio.gz"
  mv -f "$w/versions.txt" "$cache/versions.txt"
  rm -rf "$w"
  trap - EXIT
}

# The Xen kit is built (in a subshell: its own work directory and trap) when it is missing
# or its sources changed, after everything else is in the cache.
xen_kit() {
  xen_syms
  xen_kit_complete || (build_xen_kit) || exit 1
}

# --- xen-syms-4.17-amd64: the symbol file of the cached Xen (docs/xen-trace.md, "vmxsim's
# own drain"), from xen-hypervisor-4.17-amd64-dbg of exactly the version versions.txt
# names for xen-hypervisor-4.17-amd64 (the archive may hold several), added after the rest
# so that a cache without it only gains it. Its GNU build id must be the cached Xen's.
xen_syms_version() {
  sed -n 's/^xen-hypervisor-4\.17-amd64 \([^ ]*\)$/\1/p' "$cache/versions.txt" | head -n 1
}
xen_syms_complete() {
  local v
  v="$(xen_syms_version)"
  [ -n "$v" ] && [ -s "$cache/xen-syms-4.17-amd64" ] &&
    grep -qx "xen-hypervisor-4.17-amd64-dbg $v" "$cache/versions.txt" &&
    grep -q '  xen-syms-4\.17-amd64$' "$cache/versions.txt"
}
build_xen_syms() {
  local v w d idx ids
  v="$(xen_syms_version)"
  [ -n "$v" ] || die "versions.txt does not name the version of xen-hypervisor-4.17-amd64"
  command -v readelf >/dev/null || die "readelf is needed to check xen-syms' build id"
  w="$(mktemp -d "$cache/.xensyms.XXXXXX")"
  trap 'rm -rf "$w"' EXIT
  say "downloading xen-hypervisor-4.17-amd64-dbg=$v (xen-syms)"
  local opts=(-q)
  [ "$(id -u)" -eq 0 ] && opts+=(-o APT::Sandbox::User=root)
  (cd "$w" && apt-get "${opts[@]}" download "xen-hypervisor-4.17-amd64-dbg=$v" >/dev/null) ||
    die "apt-get download of xen-hypervisor-4.17-amd64-dbg=$v failed"
  d="$(ls "$w"/xen-hypervisor-4.17-amd64-dbg_*.deb 2>/dev/null | head -n 1)"
  [ -n "$d" ] || die "xen-hypervisor-4.17-amd64-dbg is missing after download"
  dpkg-deb --fsys-tarfile "$d" | tar -x -C "$w" ./usr/lib/debug/boot/xen-syms-4.17-amd64 ||
    die "no usr/lib/debug/boot/xen-syms-4.17-amd64 in $(basename "$d")"
  mv "$w/usr/lib/debug/boot/xen-syms-4.17-amd64" "$w/xen-syms-4.17-amd64"
  ids="$(for f in "$w/xen-syms-4.17-amd64" "$cache/xen-4.17-amd64"; do
    readelf -n "$f" | sed -n 's/^ *Build ID: //p' | head -n 1; done | sort -u | wc -l)"
  [ "$ids" = 1 ] || die "the build id of xen-syms-4.17-amd64 is not the cached Xen's"
  grep -v -e '^xen-hypervisor-4\.17-amd64-dbg ' -e '  xen-syms-4\.17-amd64$' \
    "$cache/versions.txt" >"$w/versions.txt"
  {
    echo "xen-hypervisor-4.17-amd64-dbg $(dpkg-deb -f "$d" Version)"
    (cd "$w" && sha256sum xen-syms-4.17-amd64)
  } >>"$w/versions.txt"
  mv -f "$w/xen-syms-4.17-amd64" "$cache/xen-syms-4.17-amd64"
  mv -f "$w/versions.txt" "$cache/versions.txt"
  rm -rf "$w"
  trap - EXIT
}
xen_syms() {
  # Optional: without it only the tests of vmxsim's own drain are skipped (they say so),
  # so an archive that no longer holds the cached Xen's debug package fails nothing else.
  xen_syms_complete || (build_xen_syms) ||
    say "xen-syms-4.17-amd64 not fetched: the tests of vmxsim's drain of Xen's trace will be skipped"
}

if complete; then
  xen_kit
  report
  exit 0
fi

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
  xen_kit
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
xen_kit
report
