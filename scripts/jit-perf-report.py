#!/usr/bin/env python3
"""Host time by translated guest block, from `perf record` of a `vmxsim run --exec
translate --jit-perf-map` (docs/TRANSLATOR.md, "Profiling translated code").

    perf record -o perf.data vmxsim run --exec translate --jit-perf-map ...
    scripts/jit-perf-report.py perf.data /tmp/perf-PID.map [TOP]

perf itself reads /tmp/perf-PID.map only for anonymous memory; vmxsim's code cache is a
memfd mapped twice, so perf reports its samples as addresses in "memfd:vmxsim-jit". This
script names them: each sample in the cache is given to the translation whose code holds
it. A flush of the cache (`--jit-stats` counts them) reuses addresses; the map then holds
several translations at one address and the latest one is named.

Status: 0, or 2 with one line on stderr for a missing or malformed input.
"""
import bisect
import collections
import subprocess
import sys


def fail(msg):
    print(f"jit-perf-report: error: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) not in (3, 4):
        fail("usage: jit-perf-report.py PERF.DATA PERF-PID.MAP [TOP]")
    data, mapf = sys.argv[1], sys.argv[2]
    top = 40
    if len(sys.argv) == 4:
        if not sys.argv[3].isdigit():
            fail(f"TOP must be a whole number, not '{sys.argv[3]}'")
        top = int(sys.argv[3])
    # Later lines win at the same start (a flush reused the address).
    spans = {}
    try:
        with open(mapf) as f:
            for n, line in enumerate(f, 1):
                parts = line.split()
                if len(parts) != 3:
                    fail(f"{mapf}:{n}: not 'START SIZE NAME'")
                try:
                    spans[int(parts[0], 16)] = (int(parts[1], 16), parts[2])
                except ValueError:
                    fail(f"{mapf}:{n}: START and SIZE must be hexadecimal")
    except OSError as e:
        fail(f"{mapf}: {e.strerror}")
    starts = sorted(spans)
    try:
        out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,dso"],
                             capture_output=True, text=True, check=False)
    except OSError as e:
        fail(f"perf: {e.strerror}")
    if out.returncode != 0:
        fail(f"perf script -i {data}: " + (out.stderr.strip().splitlines() or ["failed"])[-1])
    by_block = collections.Counter()
    total = cached = 0
    for line in out.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        total += 1
        if "vmxsim-jit" not in line:
            continue
        cached += 1
        ip = int(parts[0], 16)
        i = bisect.bisect_right(starts, ip) - 1
        if i >= 0 and ip < starts[i] + spans[starts[i]][0]:
            by_block[spans[starts[i]][1]] += 1
        else:
            by_block["(in the cache, no translation named)"] += 1
    if total == 0:
        fail(f"{data}: no samples")
    print(f"{total} samples, {cached} in translated code ({100.0 * cached / total:.1f}%)")
    for name, n in by_block.most_common(top):
        print(f"{100.0 * n / total:6.2f}%  {name}")


main()
