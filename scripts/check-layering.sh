#!/usr/bin/env bash
# The one-way layers of docs/ARCHITECTURE.md, checked from the #include lines and the
# CMake link graph:
#
#   harness/ -> the processor (cpu/ with cpu/vmx/, one processor: they may call each
#   other) -> mmu/; trace/ is a library of formats and tools; hvm/ is guest code.
#
#   1. mmu/ includes nothing from cpu/, trace/ or harness/.
#   2. cpu/ (and cpu/vmx/) include nothing from trace/ or harness/.
#   3. trace/ includes nothing from harness/ or mmu/, and of cpu/ only the data-only .def
#      tables (the SDM's lists).
#   4. hvm/ (freestanding guest code) includes of the emulator only .def tables and the
#      freestanding C headers trace/xentrace.h, trace/tbuf.h and trace/slot_layout.h.
#   5. The mmu library does not link the processor library (no link cycle).
#   6. state/ (the snapshot serializer, the lowest layer) includes nothing from mmu/,
#      cpu/, trace/ or harness/; every layer but hvm/ may include it.
#
# A violation prints "file:line: rule: the include" and the script exits 1. Violations
# that existed when the rules were written and are still being removed are listed in
# scripts/layering-known-violations.txt (file:include, one a line); an entry that no
# longer occurs must be deleted from it (the list only shrinks), and any other
# violation fails. Runs in .ci/run (scripts/test.sh) and in seconds.
set -uo pipefail
cd "$(dirname "$0")/.."

known_file=scripts/layering-known-violations.txt
declare -A known=()
if [ -f "$known_file" ]; then
  while IFS= read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    known["$line"]=0
  done <"$known_file"
fi

failures=0
report() { # file line rule include
  local key="$1:$4"
  if [[ -v known["$key"] ]]; then
    known["$key"]=1
    return
  fi
  case "$1" in
    *CMakeLists.txt) printf '%s:%s: %s: links %s\n' "$1" "$2" "$3" "$4" ;;
    *) printf '%s:%s: %s: #include "%s"\n' "$1" "$2" "$3" "$4" ;;
  esac
  failures=$((failures + 1))
}

# Every quoted include of the tracked sources under a folder: "file<TAB>line<TAB>path".
includes() {
  git ls-files -- "$1" | grep -E '\.(h|c|cpp|def|S)$' | while IFS= read -r f; do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" /dev/null |
      sed -E 's/^([^:]*):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1\t\2\t\3/'
  done
}

while IFS=$'\t' read -r f n inc; do
  case "$inc" in cpu/* | trace/* | harness/*)
    report "$f" "$n" "mmu/ includes nothing from cpu/, trace/ or harness/" "$inc" ;;
  esac
done < <(includes mmu)

while IFS=$'\t' read -r f n inc; do
  case "$inc" in mmu/* | cpu/* | trace/* | harness/*)
    report "$f" "$n" "state/ includes nothing from mmu/, cpu/, trace/ or harness/" "$inc" ;;
  esac
done < <(includes state)

while IFS=$'\t' read -r f n inc; do
  case "$inc" in trace/* | harness/*)
    report "$f" "$n" "cpu/ includes nothing from trace/ or harness/" "$inc" ;;
  esac
done < <(includes cpu)

while IFS=$'\t' read -r f n inc; do
  case "$inc" in
    harness/* | mmu/*) report "$f" "$n" "trace/ includes nothing from harness/ or mmu/" "$inc" ;;
    state/*) ;;
    cpu/*.def) ;;
    cpu/*) report "$f" "$n" "trace/ takes only the .def tables of cpu/" "$inc" ;;
  esac
done < <(includes trace)

while IFS=$'\t' read -r f n inc; do
  case "$inc" in
    cpu/*.def | trace/*.def | trace/xentrace.h | trace/tbuf.h | trace/slot_layout.h) ;;
    cpu/* | mmu/* | trace/* | harness/* | state/*)
      report "$f" "$n" "hvm/ includes of the emulator only .def tables and trace/xentrace.h, trace/tbuf.h, trace/slot_layout.h" "$inc" ;;
  esac
done < <(includes hvm)

# 5. The link graph: target_link_libraries(vmxsim_mmu ... vmxsim) in mmu/CMakeLists.txt.
while IFS=: read -r n line; do
  if printf '%s' "$line" | grep -qE 'target_link_libraries\(vmxsim_mmu[^)]*[[:space:]]vmxsim([[:space:])]|$)'; then
    report mmu/CMakeLists.txt "$n" "the mmu library does not link the processor library" "vmxsim"
  fi
done < <(grep -n 'target_link_libraries' mmu/CMakeLists.txt)

stale=0
for key in "${!known[@]}"; do
  if [ "${known[$key]}" = 0 ]; then
    printf '%s: listed in %s but no longer a violation: delete the line\n' "$key" "$known_file"
    stale=$((stale + 1))
  fi
done

if [ $failures -gt 0 ] || [ $stale -gt 0 ]; then
  printf 'layering: %d violation(s), %d stale known violation(s) (docs/ARCHITECTURE.md)\n' \
    "$failures" "$stale"
  exit 1
fi
remaining=0
for key in "${!known[@]}"; do remaining=$((remaining + 1)); done
printf 'layering: ok (%d known violation(s) left in %s)\n' "$remaining" "$known_file"
exit 0
