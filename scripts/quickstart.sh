#!/usr/bin/env bash
# The README's first Quick start command: installs what is missing, builds vmxsim and
# its guest images, boots the bundled selftest image, then runs the main job: the
# hypervisor core (hvm/images/hv) on 2 CPUs with the mixed guest scenario, writing the
# hypervisor's XenTrace and vmxsim's ground truth, checking one against the other, and
# printing the exit summary and an HTML report. Arguments go to the selftest run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >build.configure.log 2>&1 ||
  { cat build.configure.log; exit 1; }
ninja -C build vmxsim_cli vmxsim_images >/dev/null
echo "== vmxsim run build/hvm/selftest.elf"
set +e
./build/vmxsim run build/hvm/selftest.elf "$@"
status=$?
set -e
# The guest reports success by writing 0 to isa-debug-exit, which vmxsim (like QEMU)
# turns into status (0 << 1) | 1 = 1: that is success here.
if [ "$status" -ne 1 ]; then
  echo "quickstart: vmxsim exited with status $status (see README, The command)" >&2
  exit "$status"
fi

out=build/quickstart
mkdir -p "$out"
echo "== vmxsim run build/hvm/hv.elf --smp 2 --append scenario=mixed" \
  "--xentrace $out/hv.xt --trace-ground-truth $out/gt.xt"
set +e
./build/vmxsim run build/hvm/hv.elf --smp 2 --append scenario=mixed \
  --xentrace "$out/hv.xt" --trace-ground-truth "$out/gt.xt"
status=$?
set -e
if [ "$status" -ne 1 ]; then
  echo "quickstart: the hypervisor run exited with status $status" >&2
  exit "$status"
fi
echo "== vmxsim trace check $out/hv.xt $out/gt.xt"
./build/vmxsim trace check "$out/hv.xt" "$out/gt.xt"
echo "== vmxsim trace summary $out/hv.xt"
./build/vmxsim trace summary "$out/hv.xt"
./build/vmxsim trace report "$out/hv.xt" -o "$out/report.html" --title "hv: mixed on 2 CPUs"
echo "== wrote $out/hv.xt (hypervisor), $out/gt.xt (ground truth), $out/report.html"
