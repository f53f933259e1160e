#!/usr/bin/env bash
# Builds the benchmarks (optimised) and runs them, reporting medians of 5 repetitions.
#   scripts/bench.sh [benchmark-binary-name ...]   (default: all of benchmarks/)
# The peer comparisons need QEMU: scripts/peers/install-qemu.sh installs it. The whole-image
# comparison with every peer in one sitting is scripts/bench-peers.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
./scripts/peers/install-qemu.sh
benchBuild build-bench vmxsim_images $(cd benchmarks && ls *_bench.cpp | sed 's/\.cpp$//')
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(cd benchmarks && ls *_bench.cpp | sed 's/\.cpp$//'))
for b in "${names[@]}"; do
  echo "== $b"
  "./build-bench/benchmarks/$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_display_aggregates_only=true 2>&1 | grep -E "^(Benchmark|-|BM_.*_median)"
done
