#!/usr/bin/env bash
# The gdb stub end to end, with Debian's gdb in batch mode against `vmxsim run --gdb`
# (README.md, "Debugging with gdb"). Usage: gdb_e2e_test.sh BUILD_DIR SOURCE_DIR CASE
#   example  the README's worked example: a breakpoint on the hypervisor core's exit
#            handler (vmxExitHandler), continue, the exit reason from `monitor vmcs`
#            equal to the ground truth's first exit; then the run, detached, is the run
#            without gdb byte for byte (serial output, both traces, exit status)
#   threads  two CPUs as two threads named "CPU 0" and "CPU 1", each with its registers
#   watch    a write watchpoint on a variable of the hypervisor core: the stop comes
#            after the storing instruction, with the value it stored
#   rwatch   a read watchpoint (rwatch) and then an access watchpoint (awatch) on the
#            same variable: each stops after an instruction that read it, gdb shows its
#            value, and the run, detached, ends as without gdb
#   step     stepi from the exit handler's entry: the exact RIPs of the instruction trace
#            of a run without gdb
#   record   gdb's register and memory writes recorded with --record-input; the replay
#            without gdb is the session's run byte for byte, the run without the log not
#   garbage  the protocol by hand: exact replies to garbage, an interrupt, a client that
#            vanishes while the machine runs, one that closes in the middle of a packet
# Exit status 0 pass, 1 fail, 77 skipped (no gdb: the reason is printed).
set -uo pipefail
build=$1 src=$2 case=$3
vmxsim=$build/vmxsim
image=$build/hvm/hv.elf
if ! command -v gdb >/dev/null 2>&1; then
  echo "SKIPPED: gdb is not installed (scripts/setup.sh installs Debian's gdb)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmxsim-gdb-e2e.XXXXXX")
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "gdb_e2e_test ($case): FAIL: $*" >&2
  for f in "$tmp"/*.err "$tmp"/*.out; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }
  done
  exit 1
}

# start NAME ARGS...: vmxsim under the stub on a port of the system's choosing, waiting
# for gdb; sets pid and port.
start() {
  local name=$1
  shift
  "$vmxsim" run "$image" --gdb 127.0.0.1:0 --gdb-wait -q "$@" 2>"$tmp/$name.err" &
  pid=$!
  port=""
  # The listening line comes before anything runs; give a loaded machine up to 60 s.
  for _ in $(seq 600); do
    port=$(sed -n 's/^vmxsim: gdb stub listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
           "$tmp/$name.err")
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || fail "vmxsim exited before listening"
    sleep 0.1
  done
  fail "no listening line from vmxsim"
}

# gdb_batch NAME: runs gdb on $tmp/NAME.gdb against the port; output in $tmp/NAME.out.
gdb_batch() {
  timeout 600 gdb -batch -nx -ex "set pagination off" -ex "set confirm off" \
    -ex "file $image" -ex "target remote 127.0.0.1:$port" -x "$tmp/$1.gdb" \
    >"$tmp/$1.out" 2>&1 || fail "gdb failed (status $?)"
}

# finish NAME: waits for vmxsim; its status in $status.
finish() {
  wait "$pid"
  status=$?
  pid=""
}

case $case in
example)
  # The gdb commands of README.md's example, between its markers.
  sed -n '/<!-- gdb-example-begin -->/,/<!-- gdb-example-end -->/p' "$src/README.md" |
    sed -n 's/^    //p' >"$tmp/example.gdb"
  grep -q '^break vmxExitHandler$' "$tmp/example.gdb" || fail "README.md's example not found"
  args=(--append scenario=mixed --serial "$tmp/serial.gdb" --debugcon none
        --trace-ground-truth "$tmp/gt.gdb.xt" --xentrace "$tmp/hv.gdb.xt")
  start example "${args[@]}"
  gdb_batch example
  finish
  gdb_status=$status
  out=$tmp/example.out
  grep -q '^Breakpoint 1, 0x[0-9a-f]* in vmxExitHandler ()$' "$out" ||
    fail "no stop at the breakpoint on vmxExitHandler"
  reason=$(sed -n 's/^  ExitReason  *\(0x[0-9a-f]*\)$/\1/p' "$out" | head -n 1)
  [ -n "$reason" ] || fail "monitor vmcs printed no ExitReason"
  # monitor exit CPUID stopped at the host RIP; after the flush gdb reads that RIP.
  stop_rip=$(sed -n 's/^CPU 0 stopped: the VM exit (CPUID) at RIP=\(0x[0-9a-f]*\) .*/\1/p' "$out")
  [ -n "$stop_rip" ] || fail "monitor exit CPUID did not stop at a CPUID exit"
  grep -Eq "^rip +$stop_rip +$stop_rip <vmxExitEntry>\$" "$out" ||
    fail "gdb's rip after monitor exit is not $stop_rip (vmxExitEntry)"
  grep -Eq '^ground truth: the last 2 of [0-9]+ records$' "$out" &&
    grep -Eq '^hypervisor trace: the last 2 of [0-9]+ records$' "$out" ||
    fail "monitor trace 2 did not show both traces"
  # The ground truth's first exit (trace dump: "CPU0 <tsc> <delta> GT_EXIT reason=N(...)").
  first=$("$vmxsim" trace dump "$tmp/gt.gdb.xt" |
          sed -n 's/.* GT_EXIT .*reason=\([0-9]*\).*/\1/p' | head -n 1)
  [ -n "$first" ] || fail "no exit in the ground truth"
  [ $((reason & 0xffff)) -eq "$first" ] ||
    fail "gdb read exit reason $reason, the ground truth's first exit is $first"
  # Detached, the run went on to its end: the same run as without gdb.
  "$vmxsim" run "$image" -q --append scenario=mixed --serial "$tmp/serial.plain" \
    --debugcon none --trace-ground-truth "$tmp/gt.plain.xt" --xentrace "$tmp/hv.plain.xt" \
    2>"$tmp/plain.err"
  plain_status=$?
  [ "$gdb_status" -eq "$plain_status" ] ||
    fail "exit status $gdb_status under gdb, $plain_status without"
  grep -q 'hv: PASS' "$tmp/serial.plain" || fail "the plain run did not pass"
  for f in serial gt hv; do
    a=$tmp/$f.gdb b=$tmp/$f.plain
    [ "$f" = serial ] || { a=$a.xt b=$b.xt; }
    cmp -s "$a" "$b" || fail "$f differs between the run under gdb and the one without"
  done
  echo "gdb_e2e_test (example): breakpoint at vmxExitHandler, exit reason $reason =" \
       "the ground truth's first ($first); the run is the run without gdb"
  ;;
threads)
  start threads --smp 2 --append scenario=mixed --serial none --debugcon none
  cat >"$tmp/threads.gdb" <<'EOF'
break vmxExitHandler
continue
continue
continue
info threads
thread 1
printf "rip1=%#lx\n", $rip
thread 2
printf "rip2=%#lx\n", $rip
monitor exit CPUID
info threads
detach
EOF
  gdb_batch threads
  finish
  out=$tmp/threads.out
  grep -Eq '^[* ] 1 +Thread 1 "CPU 0"' "$out" || fail "no thread 1 named CPU 0"
  grep -Eq '^[* ] 2 +Thread 2 "CPU 1"' "$out" || fail "no thread 2 named CPU 1"
  grep -Eq '^CPU [01] stopped: the VM exit \(CPUID\) at RIP=0x[0-9a-f]+ \([0-9]+ instructions retired\)$' "$out" ||
    fail "monitor exit CPUID did not stop at a CPUID exit"
  # The thread that hit the breakpoint last is at the breakpoint's address.
  bp=$(sed -n 's/^Breakpoint 1 at \(0x[0-9a-f]*\)$/\1/p' "$out")
  hit=$(sed -n 's/^Thread \([12]\) "CPU [01]" hit Breakpoint 1, .*/\1/p' "$out" | tail -n 1)
  [ -n "$bp" ] && [ -n "$hit" ] || fail "no breakpoint hit"
  grep -q "^rip$hit=$bp\$" "$out" || fail "thread $hit's rip is not the breakpoint's $bp"
  grep -q '^rip1=0x' "$out" && grep -q '^rip2=0x' "$out" || fail "no RIP of each thread"
  # hv: PASS ends the run through isa-debug-exit with 0: status 1.
  [ "$status" -eq 1 ] || fail "vmxsim exited with $status after the detach, not 1"
  echo "gdb_e2e_test (threads): two CPUs as threads \"CPU 0\" and \"CPU 1\""
  ;;
watch)
  # CpusDone (hvm/images/hv/main.c) counts the CPUs that finished their guest: written
  # once on one CPU, 0 -> 1, near the end of the run.
  start watch --append scenario=mixed --serial none --debugcon none
  cat >"$tmp/watch.gdb" <<'EOF'
break vmxExitHandler
continue
delete
printf "before=%u\n", *(unsigned int *)&CpusDone
watch *(unsigned int *)&CpusDone
continue
printf "after=%u\n", *(unsigned int *)&CpusDone
info symbol $pc
detach
EOF
  gdb_batch watch
  finish
  out=$tmp/watch.out
  grep -q '^Hardware watchpoint 2: \*(unsigned int \*)&CpusDone$' "$out" ||
    fail "gdb did not set a hardware watchpoint"
  grep -q '^before=0$' "$out" || fail "CpusDone was not 0 before"
  grep -q '^after=1$' "$out" || fail "CpusDone was not 1 at the stop"
  grep -q '^Old value = 0$' "$out" && grep -q '^New value = 1$' "$out" ||
    fail "gdb did not report the store 0 -> 1"
  # hv: PASS ends the run through isa-debug-exit with 0: status 1.
  [ "$status" -eq 1 ] || fail "vmxsim exited with $status after the detach, not 1"
  echo "gdb_e2e_test (watch): stopped after the store of CpusDone 0 -> 1"
  ;;
rwatch)
  # CpusDone (hvm/images/hv/main.c): the CPU's atomic increment reads it (0 -> 1), then
  # kmain's wait loop reads it.
  start rwatch --append scenario=mixed --serial none --debugcon none
  cat >"$tmp/rwatch.gdb" <<'EOF'
break vmxExitHandler
continue
delete
rwatch *(unsigned int *)&CpusDone
continue
printf "read=%u\n", *(unsigned int *)&CpusDone
info symbol $pc
delete
awatch *(unsigned int *)&CpusDone
continue
printf "access=%u\n", *(unsigned int *)&CpusDone
info symbol $pc
detach
EOF
  gdb_batch rwatch
  finish
  out=$tmp/rwatch.out
  grep -q '^Hardware read watchpoint 2: \*(unsigned int \*)&CpusDone$' "$out" ||
    fail "gdb did not set a read watchpoint"
  grep -q '^Hardware access (read/write) watchpoint 3: \*(unsigned int \*)&CpusDone$' "$out" ||
    fail "gdb did not set an access watchpoint"
  [ "$(grep -c '^Value = 1$' "$out")" -eq 2 ] || fail "gdb did not report two reads of 1"
  grep -q '^read=1$' "$out" || fail "CpusDone was not 1 at the read stop"
  grep -q '^access=1$' "$out" || fail "CpusDone was not 1 at the access stop"
  # The increment is in runVcpu, the wait loop in kmain.
  grep -q '^runVcpu + [0-9]* in section \.text$' "$out" ||
    fail "the read stop is not after the increment in runVcpu"
  grep -q '^kmain + [0-9]* in section \.text$' "$out" ||
    fail "the access stop is not after the read in kmain's wait loop"
  [ "$status" -eq 1 ] || fail "vmxsim exited with $status after the detach, not 1"
  echo "gdb_e2e_test (rwatch): stopped after the reads of CpusDone in runVcpu and kmain"
  ;;
step)
  start step --append scenario=mixed --serial none --debugcon none
  cat >"$tmp/step.gdb" <<'EOF'
break vmxExitHandler
continue
delete
printf "pc=%#lx\n", $pc
stepi
printf "pc=%#lx\n", $pc
stepi
printf "pc=%#lx\n", $pc
stepi
printf "pc=%#lx\n", $pc
stepi
printf "pc=%#lx\n", $pc
detach
EOF
  gdb_batch step
  finish
  got=$(sed -n 's/^pc=0x//p' "$tmp/step.out" | tr '\n' ' ')
  [ "$(echo "$got" | wc -w)" -eq 5 ] || fail "not five PCs: $got"
  # The oracle: a run without gdb tracing every instruction (as far as needed): the
  # first time the handler's address runs and the four instructions after it.
  entry=$(echo "$got" | cut -d' ' -f1)
  "$vmxsim" run "$image" -q --append scenario=mixed --serial none --debugcon none \
    --max-insns 3000000 --trace-insns "$tmp/insns.txt" 2>/dev/null
  want=$(awk -v e="$entry" '{ split($2, a, ":"); r = a[2]; sub(/^0*/, "", r) }
                          found && n < 4 { printf "%s ", r; n++ }
                          !found && r == e { found = 1; printf "%s ", r }' "$tmp/insns.txt")
  [ "$got" = "$want" ] || fail "stepi RIPs: gdb $got, the instruction trace $want"
  echo "gdb_e2e_test (step): stepi RIPs $got as in the instruction trace"
  ;;
garbage)
  # The protocol by hand over a socket (bash's /dev/tcp): exact replies to garbage, an
  # interrupt sent with the continue, and a client that vanishes while the machine runs;
  # the run then goes on to the end of the run without gdb. A second vmxsim: a client
  # that disconnects in the middle of a packet. The guest is the loop image stopped at
  # 10^8 instructions (status 4): hundreds of chunks, so that the stub meets the closed
  # connection long before the run's end however the host schedules this script.
  image=$build/hvm/loop.elf
  loop=(--max-insns 100000000 --debugcon none)
  "$vmxsim" run "$image" -q "${loop[@]}" --serial "$tmp/serial.plain" 2>/dev/null
  plain_status=$?
  [ "$plain_status" -eq 4 ] || fail "the loop image ended with $plain_status, not 4"
  packet() { # the framed packet of $1
    local sum
    sum=$(printf '%s' "$1" | od -An -tu1 -v | awk '{ for (i = 1; i <= NF; i++) s += $i }
                                                   END { print s % 256 }')
    printf '$%s#%02x' "$1" "$sum"
  }
  expect() { # reads ${#1} bytes and compares them with $1
    local got
    IFS= read -r -d '' -N ${#1} -t 120 got <&3
    [ "$got" = "$1" ] || fail "sent $2: got '$got', want '$1'"
  }
  start garbage "${loop[@]}" --serial "$tmp/serial.garbage"
  exec 3<>"/dev/tcp/127.0.0.1/$port" || fail "cannot connect"
  printf '$g#00' >&3;                    expect "-" "a bad checksum"
  printf '$g#zz' >&3;                    expect "-" "a checksum that is not hex"
  printf 'noise\r\n' >&3
  printf '%s' "$(packet vMustReplyEmpty)" >&3; expect "+$(packet '')" "vMustReplyEmpty"
  printf '%s' "$(packet qNoSuchQuery)" >&3;    expect "+$(packet '')" "an unknown query"
  printf '%s' "$(packet m1000,zz)" >&3;        expect "+$(packet E01)" "truncated hex"
  printf '%s' "$(packet M1000,2:abc)" >&3;     expect "+$(packet E01)" "odd hex"
  long=$(printf 'x%.0s' $(seq 17000))
  printf '%s' "$(packet "$long")" >&3;         expect "+$(packet E01)" "an overlong packet"
  printf '%s\003' "$(packet c)" >&3;           expect "+$(packet 'T02thread:01;')" "c and 0x03"
  # Continue and vanish at once: the stub finds the connection closed after a chunk of
  # instructions, long before the run's end.
  printf '%s' "$(packet c)" >&3
  exec 3>&-
  finish
  grep -q '^vmxsim: gdb: the client went away while the machine ran; the run continues without gdb$' \
    "$tmp/garbage.err" || fail "no line for the client that went away (status $status)"
  [ "$status" -eq "$plain_status" ] || fail "status $status, without gdb $plain_status"
  cmp -s "$tmp/serial.garbage" "$tmp/serial.plain" || fail "the serial output differs"
  start torn "${loop[@]}" --serial "$tmp/serial.torn"
  exec 3<>"/dev/tcp/127.0.0.1/$port" || fail "cannot connect"
  printf '$m10' >&3
  exec 3>&-
  finish
  grep -q '^vmxsim: gdb: the connection closed in the middle of a packet; the run continues without gdb$' \
    "$tmp/torn.err" || fail "no line for the connection closed in a packet"
  [ "$status" -eq "$plain_status" ] || fail "status $status, without gdb $plain_status"
  cmp -s "$tmp/serial.torn" "$tmp/serial.plain" || fail "the serial output differs"
  echo "gdb_e2e_test (garbage): exact replies to garbage; a vanished client and a torn" \
       "packet end the session and the run is the run without gdb"
  ;;
record)
  # gdb's writes recorded with --record-input (README.md, "Input log"): at the third
  # character the core sends, rdi becomes 'Z'; at a later VM exit its "PASS" becomes
  # "XASS". The replay without gdb is the session's run byte for byte.
  args=(--smp 2 --append scenario=mixed --debugcon none)
  start record "${args[@]}" --serial "$tmp/serial.rec" --trace-ground-truth "$tmp/gt.rec.xt" \
    --xentrace "$tmp/hv.rec.xt" --record-input "$tmp/rec.log"
  cat >"$tmp/record.gdb" <<'EOF'
break uartPutc
continue
continue
continue
set $rdi = 'Z'
delete
monitor exit
monitor exit
find /b1 0x100000, 0x1fffff, 0, 'P', 'A', 'S', 'S', 0
set {char}($_ + 1) = 'X'
continue
EOF
  gdb_batch record
  finish
  rec_status=$status
  grep -q '^hvZ 2 CPUs' "$tmp/serial.rec" || fail "gdb's register write did not reach the output"
  grep -q '^hv: XASS$' "$tmp/serial.rec" || fail "gdb's memory write did not reach the output"
  [ "$(grep -c '^gdb ' "$tmp/rec.log")" -eq 4 ] || fail "the log does not hold 2 stops and 2 writes"
  "$vmxsim" run "$image" -q "${args[@]}" --serial "$tmp/serial.rep" \
    --trace-ground-truth "$tmp/gt.rep.xt" --xentrace "$tmp/hv.rep.xt" \
    --replay-input "$tmp/rec.log" 2>"$tmp/replay.err"
  [ $? -eq "$rec_status" ] || fail "the replay's status is not the session's ($rec_status)"
  cmp -s "$tmp/serial.rec" "$tmp/serial.rep" || fail "the replay's serial output differs"
  cmp -s "$tmp/gt.rec.xt" "$tmp/gt.rep.xt" || fail "the replay's ground truth differs"
  cmp -s "$tmp/hv.rec.xt" "$tmp/hv.rep.xt" || fail "the replay's hypervisor trace differs"
  "$vmxsim" run "$image" -q "${args[@]}" --serial "$tmp/serial.plain" 2>"$tmp/plain.err"
  cmp -s "$tmp/serial.rec" "$tmp/serial.plain" && fail "the run without the log is the same"
  grep -q '^hv: PASS$' "$tmp/serial.plain" || fail "the run without the log did not pass"
  echo "gdb_e2e_test (record): gdb's register and memory writes recorded; the replay" \
       "without gdb is the session's run byte for byte"
  ;;
*)
  fail "unknown case"
  ;;
esac
exit 0
