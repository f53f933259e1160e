#!/usr/bin/env bash
# Fetches the real guests vmxsim is tried on, once, into a cache outside the checkout:
#
#   Debian 12's newest linux-image-6.1.0-N-amd64-unsigned  -> vmlinuz (a bzImage)
#   busybox-static                                          -> busybox, and initramfs.cpio.gz
#   xen-hypervisor-4.17-amd64                               -> xen-4.17-amd64.gz and its ELF
#
# Cache: $VMXSIM_GUEST_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/vmxsim/guests. Nothing
# here is ever written into the checkout, and nothing downloaded is committed.
#
# Packages come from `apt-get download`, which checks each .deb against the archive's
# signed indexes (the same trust as `apt-get install`). Only the few files needed are
# unpacked (the kernel package's modules are not), so the cache stays near 15 MB.
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
set -euo pipefail

cache="${VMXSIM_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmxsim/guests}"
files=(vmlinuz busybox initramfs.cpio.gz xen-4.17-amd64.gz xen-4.17-amd64 versions.txt)

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

complete() {
  local f
  for f in "${files[@]}"; do [ -s "$cache/$f" ] || return 1; done
  grep -qx "init-script $init_sum" "$cache/versions.txt"
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
# build_initramfs BUSYBOX ROOTDIR OUTPUT
build_initramfs() {
  local root="$2"
  mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev"
  cp "$1" "$root/bin/busybox"
  printf '%s\n' "$init_script" >"$root/init"
  chmod 755 "$root/init" "$root/bin/busybox"
  # Reproducible archive: fixed times, owner root, names in sorted order.
  find "$root" -exec touch -h -d @0 {} +
  (cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
    cpio -o -H newc --quiet --owner=0:0 --reproducible) | gzip -9n >"$3"
}

# Everything is there but the /init changed: rebuild only the initramfs from the cached
# busybox (no download), and record the new script in versions.txt.
only_init_changed() {
  local f
  for f in "${files[@]}"; do [ -s "$cache/$f" ] || return 1; done
  command -v cpio >/dev/null
}
if only_init_changed; then
  say "the /init script changed: rebuilding the initramfs only"
  work="$(mktemp -d "$cache/.work.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  build_initramfs "$cache/busybox" "$work/root" "$work/initramfs.cpio.gz"
  sum="$(cd "$work" && sha256sum initramfs.cpio.gz)"
  awk -v init="init-script $init_sum" -v sum="$sum" '
    /^init-script / { print init; next }
    / initramfs\.cpio\.gz$/ { print sum; next }
    { print }' "$cache/versions.txt" >"$work/versions.txt"
  mv -f "$work/initramfs.cpio.gz" "$cache/initramfs.cpio.gz"
  mv -f "$work/versions.txt" "$cache/versions.txt"
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

build_initramfs "$out/busybox" "$work/root" "$out/initramfs.cpio.gz"

ver() { dpkg-deb -f "$1" Version; }
{
  echo "# vmxsim guests, fetched $(date -u +%Y-%m-%d) with apt-get download (Debian 12)"
  echo "$kpkg $(ver "$kdeb") kernel $kver"
  echo "busybox-static $(ver "$bdeb")"
  echo "xen-hypervisor-4.17-amd64 $(ver "$xdeb")"
  echo "init-script $init_sum"
  (cd "$out" && sha256sum vmlinuz busybox initramfs.cpio.gz xen-4.17-amd64.gz xen-4.17-amd64)
} >"$out/versions.txt"

for f in "${files[@]}"; do mv -f "$out/$f" "$cache/$f"; done
report
