# Reads vmxsim's instruction trace (vmxsim run --trace-insns; harness/insn_trace.cpp:
# retired count, CS:RIP, instruction bytes, Capstone's Intel-syntax disassembly, then
# changed registers as " name=0x...") and prints "mnemonic<TAB>operand form<TAB>count"
# for every distinct form, e.g. "mov<TAB>r64,m64<TAB>1234". Used by coverage-report.sh.

function operandKind(Op) {
  if (Op ~ /ptr /) {
    if (Op ~ /^byte ptr/) return "m8"
    if (Op ~ /^word ptr/) return "m16"
    if (Op ~ /^dword ptr/) return "m32"
    if (Op ~ /^fword ptr/) return "m48"
    if (Op ~ /^qword ptr/) return "m64"
    if (Op ~ /^tbyte ptr/) return "m80"
    if (Op ~ /^xmmword ptr/) return "m128"
    if (Op ~ /^ymmword ptr/) return "m256"
    return "m"
  }
  if (Op ~ /^\[/) return "m"
  if (Op ~ /^-?(0x[0-9a-f]+|[0-9]+)$/) return "imm"
  if (Op ~ /^(0x[0-9a-f]+|[0-9]+):(0x[0-9a-f]+|[0-9]+)$/) return "far"
  if (Op ~ /^(al|cl|dl|bl|ah|ch|dh|bh|spl|bpl|sil|dil|r([89]|1[0-5])b)$/) return "r8"
  if (Op ~ /^(ax|cx|dx|bx|sp|bp|si|di|r([89]|1[0-5])w)$/) return "r16"
  if (Op ~ /^(eax|ecx|edx|ebx|esp|ebp|esi|edi|r([89]|1[0-5])d)$/) return "r32"
  if (Op ~ /^(rax|rcx|rdx|rbx|rsp|rbp|rsi|rdi|r([89]|1[0-5]))$/) return "r64"
  if (Op ~ /^xmm[0-9]+$/) return "xmm"
  if (Op ~ /^ymm[0-9]+$/) return "ymm"
  if (Op ~ /^(cs|ds|es|fs|gs|ss)$/) return "sreg"
  if (Op ~ /^cr[0-9]+$/) return "cr"
  if (Op ~ /^dr[0-9]+$/) return "dr"
  if (Op ~ /^st\([0-7]\)$/) return "st"
  return Op
}

$0 ~ /\(instruction fetch\)/ { next }
{
  Line = $0
  sub(/ -> #.*$/, "", Line)                 # a faulting instruction: drop the event
  sub(/^ *[0-9]+ +[0-9a-f]+:[0-9a-f]+ /, "", Line)   # retired count, CS:RIP
  while (match(Line, /^([0-9a-f][0-9a-f]|\?\?) /)) # instruction bytes
    Line = substr(Line, RLENGTH + 1)
  sub(/^ +/, "", Line)
  sub(/( +[a-z0-9]+=0x[0-9a-f]+)+ *$/, "", Line)   # changed registers
  sub(/ +$/, "", Line)
  if (Line == "") next
  Mnemonic = Line; Operands = ""
  # Prefixes Capstone prints as words belong to the mnemonic ("rep movsb").
  while (match(Mnemonic, /^(rep|repe|repne|repz|repnz|lock|notrack|bnd) /)) {
    Pre = Pre substr(Mnemonic, 1, RLENGTH)
    Mnemonic = substr(Mnemonic, RLENGTH + 1)
  }
  if ((P = index(Mnemonic, " ")) > 0) {
    Operands = substr(Mnemonic, P + 1)
    Mnemonic = substr(Mnemonic, 1, P - 1)
  }
  Mnemonic = Pre Mnemonic; Pre = ""
  sub(/ +$/, "", Mnemonic)
  Form = ""
  if (Operands != "") {
    N = split(Operands, Ops, ", ")
    for (I = 1; I <= N; ++I) Form = Form (I > 1 ? "," : "") operandKind(Ops[I])
  }
  ++Count[Mnemonic "\t" Form]
}
END { for (K in Count) print K "\t" Count[K] }
