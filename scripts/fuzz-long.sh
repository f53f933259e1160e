#!/bin/sh
# Hours of differential fuzzing against KVM (`vmxsim xcheck fuzz`, harness/kvm/fuzz.h).
#
#   scripts/fuzz-long.sh [HOURS] [FIRST_SEED] [STREAMS_PER_SEED]
#
# Runs seed after seed (FIRST_SEED, FIRST_SEED+1, ...) of STREAMS_PER_SEED streams each
# until HOURS have passed. Minimised divergences are written as regression cases to
# $OUT/regressions (review them, then move real ones to tests/xcheck/regressions/ with
# the emulator fix, or to tests/xcheck/regressions/open/), the merged coverage to
# $OUT/coverage.tsv ("kind<TAB>name<TAB>count", the format the coverage report reads),
# a line per seed to $OUT/log.txt. Environment: VMXSIM (the program, default
# build/vmxsim), OUT (default fuzz-out). Exit status 1 if any seed diverged, 2 on a host
# problem (no /dev/kvm).
set -u
HOURS=${1:-4}
SEED=${2:-1000}
STREAMS=${3:-200000}
VMXSIM=${VMXSIM:-build/vmxsim}
OUT=${OUT:-fuzz-out}
mkdir -p "$OUT/regressions" "$OUT/coverage.d"
END=$(( $(date +%s) + $(awk "BEGIN { printf \"%d\", $HOURS * 3600 }") ))
STATUS=0
TOTAL=0
while [ "$(date +%s)" -lt "$END" ]; do
  "$VMXSIM" xcheck fuzz --seed "$SEED" --streams "$STREAMS" --max-reported 5 \
      --regressions "$OUT/regressions" --coverage "$OUT/coverage.d/$SEED.tsv" \
      > "$OUT/seed-$SEED.txt" 2>&1
  RC=$?
  head -n 1 "$OUT/seed-$SEED.txt" | tee -a "$OUT/log.txt"
  if [ "$RC" -eq 2 ]; then
    cat "$OUT/seed-$SEED.txt" >&2
    exit 2
  fi
  [ "$RC" -ne 0 ] && STATUS=1
  [ "$RC" -eq 0 ] && rm -f "$OUT/seed-$SEED.txt"
  TOTAL=$((TOTAL + STREAMS))
  SEED=$((SEED + 1))
done
# Merge the per-seed coverage files (sum the counts per kind and name, sorted).
cat "$OUT"/coverage.d/*.tsv | awk -F '\t' '{ n[$1 "\t" $2] += $3 } END { for (k in n) print k "\t" n[k] }' \
  | LC_ALL=C sort > "$OUT/coverage.tsv"
echo "fuzz-long: $TOTAL streams generated over seeds up to $((SEED - 1)); status $STATUS (see $OUT/log.txt)"
exit "$STATUS"
