#!/usr/bin/env bash
# Installs Bochs 2.7 (the software-VMX reference peer) and what run-bochs.sh needs to
# boot a Multiboot image on it: the BIOS images, the SDL2 display library (Debian's
# build has no "nogui"), and GRUB's rescue-ISO tools (Bochs 2.7 cannot load a kernel
# directly). Idempotent and quiet: prints nothing when everything is present. It is not
# a build dependency, so scripts/setup.sh leaves it out.
set -euo pipefail
pkgs=(bochs bochsbios vgabios bochs-sdl grub-pc-bin grub-common xorriso mtools)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-bochs: installing ${missing[*]}" >&2
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
