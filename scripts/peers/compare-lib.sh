# Shared by compare-bochs.sh and compare-qemu.sh (sourced, not run): running vmxsim with
# limits, and the line-for-line comparison with its table of documented differences
# (deviations.tsv, explained in docs/peer-deviations.md).
#
# Environment read here:
#   VMXSIM            the vmxsim program (default: $VMXSIM_BUILD/vmxsim)
#   VMXSIM_BUILD      build directory holding vmxsim and hvm/*.elf (default: build)
#   VMXSIM_MAX_INSNS  instruction limit of the vmxsim run (default 4000000000: every
#                     compared image needs under 25 million)
#   VMXSIM_TIMEOUT    seconds before the vmxsim run is killed (default 120)

PeersDir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RepoDir=$(cd "$PeersDir/../.." && pwd)
DeviationTable="$PeersDir/deviations.tsv"

# Prints the vmxsim program to use, or fails with a message.
vmxsimProgram() {
  local P=${VMXSIM:-${VMXSIM_BUILD:-$RepoDir/build}/vmxsim}
  if [ ! -x "$P" ]; then
    echo "$Tool: no vmxsim program at $P (build it, or set VMXSIM or VMXSIM_BUILD)" >&2
    return 2
  fi
  echo "$P"
}

# Seconds since the epoch with milliseconds, for timing the runs.
nowSeconds() { date +%s.%N; }
elapsed() { awk -v A="$1" -v B="$2" 'BEGIN { printf "%.2f", B - A }'; }

# runVmxsim OUT ARGS...: runs "vmxsim run -q ARGS" with its serial output in OUT and
# prints its exit status. A guest exit is odd ((value << 1) | 1, as QEMU); 4 is the
# instruction limit and 124 the timeout, both reported on stderr.
runVmxsim() {
  local Out=$1; shift
  local Prog Status=0
  Prog=$(vmxsimProgram) || { echo 2; return; }
  timeout -k 5 "${VMXSIM_TIMEOUT:-120}" "$Prog" run -q \
    --max-insns "${VMXSIM_MAX_INSNS:-4000000000}" --serial "file:$Out" --debugcon none \
    "$@" </dev/null >/dev/null 2>"$Out.stderr" || Status=$?
  [ -f "$Out" ] || : >"$Out"
  case $Status in
  4) echo "$Tool: vmxsim: the guest did not finish within ${VMXSIM_MAX_INSNS:-4000000000} instructions (status 4)" >&2 ;;
  124 | 137) echo "$Tool: vmxsim: killed after ${VMXSIM_TIMEOUT:-120} s (status $Status)" >&2 ;;
  *) if [ $((Status % 2)) -eq 0 ]; then
       echo "$Tool: vmxsim stopped without a guest exit (status $Status):" >&2
       sed 's/^/  /' "$Out.stderr" >&2
     fi ;;
  esac
  echo "$Status"
}

# compareOutputs PEER IMAGENAME VMXSIM_OUT PEER_OUT [prefix]: compares the two outputs
# line for line; with "prefix" (a run that did not finish) only as many lines as the
# shorter output has, so that the output up to the stop is still checked. Prints the differences and sets two globals:
#   Verdict   "identical", "explained by ID(n),ID(n)" or "UNEXPLAINED n lines"
#   Compared  "N lines" (or "N/M lines" when the line counts differ)
# Returns 0 unless a difference is unexplained.
#
# A differing line (in either output) is explained when a "line" row of deviations.tsv
# for this peer and image matches it. The differing lines left over are explained by
# an "order" row when they are the same lines in another order (output of several
# processors, whose interleaving no architectural rule fixes).
compareOutputs() {
  local Peer=$1 Name=$2 A=$3 B=$4 Prefix=${5:-}
  local LinesA LinesB
  if [ -n "$Prefix" ]; then
    local N
    N=$( (awk 'END { print NR }' "$A"; awk 'END { print NR }' "$B") | sort -n | head -n 1)
    head -n "$N" "$A" >"$A.prefix"; head -n "$N" "$B" >"$B.prefix"
    A=$A.prefix B=$B.prefix
  fi
  LinesA=$(awk 'END { print NR }' "$A")
  LinesB=$(awk 'END { print NR }' "$B")
  if [ "$LinesA" = "$LinesB" ]; then Compared="$LinesA"; else Compared="$LinesA/$LinesB"; fi
  if [ "$LinesA" = 1 ] && [ "$LinesB" = 1 ]; then Compared="$Compared line"; else Compared="$Compared lines"; fi
  [ -z "$Prefix" ] || Compared="first $Compared"
  if cmp -s "$A" "$B"; then
    Verdict=identical
    return 0
  fi
  local Result
  # diff marks each differing line "<" (vmxsim) or ">" (peer); the awk program assigns
  # each to a documented difference or leaves it unexplained.
  Result=$(diff --unchanged-line-format= --old-line-format='<%L' --new-line-format='>%L' \
             "$A" "$B" |
    awk -v Peer="$Peer" -v Name="$Name" -v Table="$DeviationTable" '
      function globMatch(Glob, S,   R) {
        R = Glob; gsub(/\./, "\\.", R); gsub(/\*/, ".*", R)
        return S ~ ("^" R "$")
      }
      BEGIN {
        FS = "\t"
        while ((getline Row < Table) > 0) {
          if (Row ~ /^#/ || Row ~ /^[ \t]*$/) continue
          split(Row, F, "\t")
          if ((F[2] != Peer && F[2] != "*") || !globMatch(F[3], Name)) continue
          if (F[4] == "line") { ++NLine; LineId[NLine] = F[1]; LineRe[NLine] = F[5] }
          else if (F[4] == "order") OrderId = F[1]
        }
        FS = "\n"
      }
      {
        Side = substr($0, 1, 1); Text = substr($0, 2)
        for (I = 1; I <= NLine; ++I)
          if (Text ~ LineRe[I]) { ++Count[LineId[I]]; if (!(LineId[I] in Seen)) { Seen[LineId[I]] = 1; Order[++NIds] = LineId[I] } next }
        if (Side == "<") Old[++NOld] = Text; else New[++NNew] = Text
        Unexplained[++NUn] = $0
      }
      END {
        if (NUn > 0 && OrderId != "" && NOld == NNew) {
          # Same multiset of lines on both sides: only the order differs.
          for (I = 1; I <= NOld; ++I) { ++Bag[Old[I]]; --Bag[New[I]] }
          Same = 1
          for (K in Bag) if (Bag[K] != 0) Same = 0
          if (Same) { Count[OrderId] += NUn; Order[++NIds] = OrderId; NUn = 0 }
        }
        if (NUn > 0) {
          printf "UNEXPLAINED %d lines\n", NUn
          for (I = 1; I <= NUn; ++I) print "  " Unexplained[I]
          exit
        }
        S = ""
        for (I = 1; I <= NIds; ++I) S = S (I > 1 ? "," : "") Order[I] "(" Count[Order[I]] ")"
        print "explained by " S
      }')
  Verdict=$(head -n 1 <<<"$Result")
  echo "$Tool: $Name: vmxsim (<) and $Peer (>) differ:"
  diff "$A" "$B" | awk '{ if (NR <= 40) print "  " $0 } END { if (NR > 40) print "  ... (" NR - 40 " more diff lines)" }' || true
  if [ "${Verdict#UNEXPLAINED}" != "$Verdict" ]; then
    echo "$Tool: $Name: lines no documented difference explains:"
    tail -n +2 <<<"$Result" | awk '{ if (NR <= 20) print } END { if (NR > 20) print "  ... (" NR - 20 " more)" }'
    return 1
  fi
  echo "$Tool: $Name: every difference is documented ($Verdict; see docs/peer-deviations.md)"
  return 0
}

# The summary line crosscheck-all.sh collects: tab-separated fields after "RESULT".
resultLine() { # image peer compared verdict seconds-vmxsim seconds-peer
  printf 'RESULT\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@"
}
