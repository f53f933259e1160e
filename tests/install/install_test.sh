#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and uses it as a stranger would:
#  1. the CMake package: builds examples/hypervisor-test against it and runs its test;
#  2. the pkg-config file: compiles and runs a one-file program with its flags;
#  3. the installed vmxsim command runs the installed selftest image.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR CXX [LAUNCHER]
set -euo pipefail
build=$1 src=$2 cxx=$3 launcher=${4:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmxsim-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in bin/vmxsim lib/libvmxsim.a lib/libvmxsim_mmu.a include/vmxsim/harness/machine.h \
         include/vmxsim/cpu/vmx/vmcs_fields.def share/vmxsim/images/hv.elf \
         lib/cmake/vmxsim/vmxsimConfig.cmake lib/pkgconfig/vmxsim.pc; do
  [ -e "$prefix/$f" ] || { echo "install_test: $f was not installed" >&2; exit 1; }
done

# 1. find_package(vmxsim)
cmake -S "$src/examples/hypervisor-test" -B "$tmp/example" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} >"$tmp/configure.log" ||
  { cat "$tmp/configure.log" >&2; exit 1; }
cmake --build "$tmp/example" >"$tmp/build.log" || { cat "$tmp/build.log" >&2; exit 1; }
ctest --test-dir "$tmp/example" --output-on-failure
echo "install_test: the example project built against the package and passed"

# 2. pkg-config
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
imagedir=$(pkg-config --variable=imagedir vmxsim)
cat >"$tmp/pc.cpp" <<'CPP'
#include "harness/machine.h"
#include <cstdio>
int main(int, char **Argv) {
  vmxsim::MachineConfig Cfg;
  Cfg.Kernel = Argv[1];
  Cfg.Append = "scenario=cpuid";
  Cfg.Serial = vmxsim::OutputSpec::capture();
  Cfg.Debugcon = vmxsim::OutputSpec::discard();
  vmxsim::Error Err;
  auto M = vmxsim::Machine::create(Cfg, Err);
  if (!M) { std::fprintf(stderr, "%s\n", Err.str().c_str()); return 2; }
  vmxsim::RunResult R = M->run();
  std::printf("%s\n", R.describe().c_str());
  return M->serialOutput().find("hv: PASS\n") == std::string::npos;
}
CPP
# shellcheck disable=SC2046
$launcher "$cxx" $(pkg-config --cflags vmxsim) "$tmp/pc.cpp" -o "$tmp/pc" \
  $(pkg-config --libs vmxsim) ${VMXSIM_SAN_FLAGS:-}
out=$("$tmp/pc" "$imagedir/hv.elf")
[ "$out" = "guest exit 0x0 (status 1)" ] ||
  { echo "install_test: pkg-config program said '$out'" >&2; exit 1; }
echo "install_test: a program built with pkg-config's flags ran the installed hv.elf: $out"

# 3. the command: the guest's isa-debug-exit 0 is status 1 (harness/README.md)
status=0
"$prefix/bin/vmxsim" run -q "$prefix/share/vmxsim/images/hv.elf" --append scenario=cpuid \
  >"$tmp/run.log" || status=$?
grep -q '^hv: PASS$' "$tmp/run.log" && [ $status -eq 1 ] ||
  { cat "$tmp/run.log" >&2; echo "install_test: installed vmxsim exited $status" >&2; exit 1; }
echo "install_test: the installed vmxsim ran the installed hv.elf (status 1, hv: PASS)"
