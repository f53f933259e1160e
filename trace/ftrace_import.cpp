#include "trace/ftrace_import.h"

#include "trace/import_files.h"
#include "trace/writer.h"
#include "trace/xentrace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace vmxsim::trace {

namespace {

/// Linux 6.1's names of the basic VMX exit reasons in kvm_exit's output (VMX_EXIT_REASONS
/// of arch/x86/include/uapi/asm/vmx.h, as the format string in Debian's kvm.ko lists
/// them): KVM's vocabulary, not the SDM's (cpu/vmx/exit_reasons.def has those).
struct ReasonName {
  const char *Name;
  uint32_t Number;
};
constexpr ReasonName kKvmExitReasons[] = {
    {"EXCEPTION_NMI", 0},        {"EXTERNAL_INTERRUPT", 1},   {"TRIPLE_FAULT", 2},
    {"INIT_SIGNAL", 3},          {"SIPI_SIGNAL", 4},          {"INTERRUPT_WINDOW", 7},
    {"NMI_WINDOW", 8},           {"TASK_SWITCH", 9},          {"CPUID", 10},
    {"HLT", 12},                 {"INVD", 13},                {"INVLPG", 14},
    {"RDPMC", 15},               {"RDTSC", 16},               {"VMCALL", 18},
    {"VMCLEAR", 19},             {"VMLAUNCH", 20},            {"VMPTRLD", 21},
    {"VMPTRST", 22},             {"VMREAD", 23},              {"VMRESUME", 24},
    {"VMWRITE", 25},             {"VMOFF", 26},               {"VMON", 27},
    {"CR_ACCESS", 28},           {"DR_ACCESS", 29},           {"IO_INSTRUCTION", 30},
    {"MSR_READ", 31},            {"MSR_WRITE", 32},           {"INVALID_STATE", 33},
    {"MSR_LOAD_FAIL", 34},       {"MWAIT_INSTRUCTION", 36},   {"MONITOR_TRAP_FLAG", 37},
    {"MONITOR_INSTRUCTION", 39}, {"PAUSE_INSTRUCTION", 40},   {"MCE_DURING_VMENTRY", 41},
    {"TPR_BELOW_THRESHOLD", 43}, {"APIC_ACCESS", 44},         {"EOI_INDUCED", 45},
    {"GDTR_IDTR", 46},           {"LDTR_TR", 47},             {"EPT_VIOLATION", 48},
    {"EPT_MISCONFIG", 49},       {"INVEPT", 50},              {"RDTSCP", 51},
    {"PREEMPTION_TIMER", 52},    {"INVVPID", 53},             {"WBINVD", 54},
    {"XSETBV", 55},              {"APIC_WRITE", 56},          {"RDRAND", 57},
    {"INVPCID", 58},             {"VMFUNC", 59},              {"ENCLS", 60},
    {"RDSEED", 61},              {"PML_FULL", 62},            {"XSAVES", 63},
    {"XRSTORS", 64},             {"UMWAIT", 67},              {"TPAUSE", 68},
    {"BUS_LOCK", 74},            {"NOTIFY", 75},
};

/// A cursor over one line's fields; every parse either consumes what it expects or fails.
struct Cursor {
  std::string_view S;
  size_t P = 0;

  bool done() const { return P >= S.size(); }
  bool lit(std::string_view L) {
    if (S.substr(P, L.size()) != L)
      return false;
    P += L.size();
    return true;
  }
  void spaces() {
    while (P < S.size() && S[P] == ' ')
      ++P;
  }
  /// A run of characters up to the next space (or the end).
  std::string_view word() {
    size_t E = P;
    while (E < S.size() && S[E] != ' ')
      ++E;
    std::string_view W = S.substr(P, E - P);
    P = E;
    return W;
  }
  /// Hex digits (an optional "0x" first), at most 16.
  bool hex(uint64_t &V) {
    lit("0x");
    size_t N = 0;
    V = 0;
    while (P < S.size() && std::isxdigit(uint8_t(S[P]))) {
      if (++N > 16)
        return false;
      const char C = S[P++];
      V = V << 4 | uint64_t(C <= '9' ? C - '0' : (C | 0x20) - 'a' + 10);
    }
    return N > 0;
  }
  bool dec(uint64_t &V) {
    size_t N = 0;
    V = 0;
    while (P < S.size() && S[P] >= '0' && S[P] <= '9') {
      if (++N > 19)
        return false;
      V = V * 10 + uint64_t(S[P++] - '0');
    }
    return N > 0;
  }
  bool hex32(uint32_t &V) {
    uint64_t W;
    if (!hex(W) || W > 0xffffffffu)
      return false;
    V = uint32_t(W);
    return true;
  }
  bool dec32(uint32_t &V) {
    uint64_t W;
    if (!dec(W) || W > 0xffffffffu)
      return false;
    V = uint32_t(W);
    return true;
  }
};

/// One parsed event, ready to be written.
struct Rec {
  unsigned Cpu = 0;
  uint64_t Tsc = 0;
  uint32_t Event = 0, NumWords = 0;
  uint32_t Words[XT_MAX_WORDS] = {};
  uint32_t InfoEvent = 0, InfoWords = 0; ///< the untimed record after it (0: none)
  uint32_t Info[XT_MAX_WORDS] = {};
};

uint32_t lo(uint64_t V) { return uint32_t(V); }
uint32_t hi(uint64_t V) { return uint32_t(V >> 32); }

template <unsigned N> void set(uint32_t *Dst, uint32_t &Count, const uint32_t (&Src)[N]) {
  std::copy(Src, Src + N, Dst);
  Count = N;
}

/// kvm_exit: "vcpu %u reason %s%s%s rip 0x%lx info1 0x%016llx info2 0x%016llx intr_info
/// 0x%08x error_code 0x%08x" (the reason: a name or a number, then flag names).
bool parseExit(Cursor &C, Rec &R) {
  uint32_t Vcpu, Reason = 0, Intr, Err;
  uint64_t Rip, Info1, Info2;
  if (!C.lit("vcpu ") || !C.dec32(Vcpu) || !C.lit(" reason "))
    return false;
  std::string_view Name = C.word();
  const auto *It = std::find_if(std::begin(kKvmExitReasons), std::end(kKvmExitReasons),
                                [&](const ReasonName &N) { return Name == N.Name; });
  if (It != std::end(kKvmExitReasons)) {
    Reason = It->Number;
  } else {
    Cursor N{Name};
    uint64_t V;
    if (!N.lit("0x") || !N.hex(V) || !N.done() || V > 0xffff)
      return false;
    Reason = uint32_t(V);
  }
  // Flags (bits 16-31): " FAILED_VMENTRY", or a number for bits without a name.
  while (C.lit(" ") && !C.lit("rip ")) {
    std::string_view F = C.word();
    if (F == "FAILED_VMENTRY") {
      Reason |= 0x80000000u;
    } else {
      Cursor N{F};
      uint64_t V;
      if (!N.lit("0x") || !N.hex(V) || !N.done() || (V & 0xffff) || V > 0xffffffffu)
        return false;
      Reason |= uint32_t(V);
    }
  }
  if (C.S.substr(C.P - 4, 4) != "rip ")
    return false;
  if (!C.hex(Rip) || !C.lit(" info1 ") || !C.hex(Info1) || !C.lit(" info2 ") || !C.hex(Info2) ||
      !C.lit(" intr_info ") || !C.hex32(Intr) || !C.lit(" error_code ") || !C.hex32(Err))
    return false;
  R.Event = XT_EV_VmxExit64;
  set(R.Words, R.NumWords, {Reason, lo(Rip), hi(Rip)});
  R.InfoEvent = XT_EV_KvmExitInfo;
  set(R.Info, R.InfoWords, {Vcpu, lo(Info1), hi(Info1), lo(Info2), hi(Info2), Intr, Err});
  return true;
}

/// kvm_entry: "vcpu %u, rip 0x%lx%s" ("[immediate exit]" or nothing).
bool parseEntry(Cursor &C, Rec &R) {
  uint32_t Vcpu;
  uint64_t Rip;
  if (!C.lit("vcpu ") || !C.dec32(Vcpu) || !C.lit(", rip ") || !C.hex(Rip))
    return false;
  const uint32_t Immediate = C.lit("[immediate exit]") ? 1 : 0;
  R.Event = XT_EV_VmEntry;
  R.NumWords = 0;
  R.InfoEvent = XT_EV_KvmEntryInfo;
  set(R.Info, R.InfoWords, {Vcpu, lo(Rip), hi(Rip), Immediate});
  return true;
}

/// kvm_pio: "pio_%s at 0x%x size %d count %d val 0x%x %s" ("(...)" when count > 1).
bool parsePio(Cursor &C, Rec &R) {
  uint32_t Write, Port, Size, Count, Val;
  if (C.lit("pio_write at "))
    Write = 1;
  else if (C.lit("pio_read at "))
    Write = 0;
  else
    return false;
  if (!C.hex32(Port) || !C.lit(" size ") || !C.dec32(Size) || !C.lit(" count ") ||
      !C.dec32(Count) || !C.lit(" val ") || !C.hex32(Val))
    return false;
  if (C.lit(" ") && !C.lit("(...)"))
    return false;
  R.Event = XT_EV_KvmPio;
  set(R.Words, R.NumWords, {Write, Port, Size, Count, Val});
  return true;
}

/// kvm_mmio: "mmio %s len %u gpa 0x%llx val 0x%llx".
bool parseMmio(Cursor &C, Rec &R) {
  uint32_t Type, Len;
  uint64_t Gpa, Val;
  if (C.lit("mmio unsatisfied-read "))
    Type = 0;
  else if (C.lit("mmio read "))
    Type = 1;
  else if (C.lit("mmio write "))
    Type = 2;
  else
    return false;
  if (!C.lit("len ") || !C.dec32(Len) || !C.lit(" gpa ") || !C.hex(Gpa) || !C.lit(" val ") ||
      !C.hex(Val))
    return false;
  R.Event = XT_EV_KvmMmio;
  set(R.Words, R.NumWords, {Type, Len, lo(Gpa), hi(Gpa), lo(Val), hi(Val)});
  return true;
}

/// kvm_msr: "msr_%s %x = 0x%llx%s" (" (#GP)" when the access faulted).
bool parseMsr(Cursor &C, Rec &R) {
  uint32_t Write, Msr;
  uint64_t Val;
  if (C.lit("msr_write "))
    Write = 1;
  else if (C.lit("msr_read "))
    Write = 0;
  else
    return false;
  if (!C.hex32(Msr) || !C.lit(" = ") || !C.hex(Val))
    return false;
  const uint32_t Gp = C.lit(" (#GP)") ? 1 : 0;
  R.Event = XT_EV_KvmMsr;
  set(R.Words, R.NumWords, {Write, Msr, lo(Val), hi(Val), Gp});
  return true;
}

/// kvm_cr: "cr_%s %x = 0x%lx".
bool parseCr(Cursor &C, Rec &R) {
  uint32_t Write, Cr;
  uint64_t Val;
  if (C.lit("cr_write "))
    Write = 1;
  else if (C.lit("cr_read "))
    Write = 0;
  else
    return false;
  if (!C.hex32(Cr) || !C.lit(" = ") || !C.hex(Val))
    return false;
  R.Event = XT_EV_KvmCr;
  set(R.Words, R.NumWords, {Write, Cr, lo(Val), hi(Val)});
  return true;
}

/// kvm_cpuid: "func %x idx %x rax %lx rbx %lx rcx %lx rdx %lx, cpuid entry %s%s"
/// ("found" or "not found", then ", used max basic" or nothing).
bool parseCpuid(Cursor &C, Rec &R) {
  uint32_t Func, Idx, A, B, Cx, D;
  if (!C.lit("func ") || !C.hex32(Func) || !C.lit(" idx ") || !C.hex32(Idx) ||
      !C.lit(" rax ") || !C.hex32(A) || !C.lit(" rbx ") || !C.hex32(B) || !C.lit(" rcx ") ||
      !C.hex32(Cx) || !C.lit(" rdx ") || !C.hex32(D) || !C.lit(", cpuid entry "))
    return false;
  uint32_t Flags;
  if (C.lit("found"))
    Flags = 1;
  else if (C.lit("not found"))
    Flags = 0;
  else
    return false;
  if (C.lit(", used max basic"))
    Flags |= 2;
  R.Event = XT_EV_KvmCpuid;
  set(R.Words, R.NumWords, {Func, Idx, A, B, Cx, D, Flags});
  return true;
}

/// kvm_inj_virq: "%s 0x%x%s" ("IRQ" or "Soft/INTn", then " [reinjected]" or nothing).
bool parseInjVirq(Cursor &C, Rec &R) {
  uint32_t Soft, Vector;
  if (C.lit("IRQ "))
    Soft = 0;
  else if (C.lit("Soft/INTn "))
    Soft = 1;
  else
    return false;
  if (!C.hex32(Vector) || Vector > 0xff)
    return false;
  const uint32_t Reinjected = C.lit(" [reinjected]") ? 1 : 0;
  R.Event = XT_EV_KvmInjVirq;
  set(R.Words, R.NumWords, {Vector, Soft, Reinjected});
  return true;
}

struct EventParser {
  std::string_view Name;
  bool (*Parse)(Cursor &, Rec &);
};
constexpr EventParser kParsers[] = {
    {"kvm_exit", parseExit},   {"kvm_entry", parseEntry}, {"kvm_pio", parsePio},
    {"kvm_mmio", parseMmio},   {"kvm_msr", parseMsr},     {"kvm_cr", parseCr},
    {"kvm_cpuid", parseCpuid}, {"kvm_inj_virq", parseInjVirq},
};

bool isEventNameChar(char C) {
  return (C >= 'a' && C <= 'z') || (C >= 'A' && C <= 'Z') || (C >= '0' && C <= '9') || C == '_';
}

/// Splits an event line into CPU, timestamp text, event name and fields. The task name
/// (before "-<pid>") may hold spaces and brackets: the CPU is the first "[<digits>]"
/// followed by a space.
bool splitLine(std::string_view L, unsigned &Cpu, std::string_view &Ts, std::string_view &Name,
               std::string_view &Fields, std::string &Why) {
  size_t P = 0;
  for (;;) {
    P = L.find('[', P);
    if (P == std::string_view::npos) {
      Why = "no [CPU] field";
      return false;
    }
    size_t E = P + 1;
    while (E < L.size() && L[E] >= '0' && L[E] <= '9')
      ++E;
    if (E > P + 1 && E < L.size() && L[E] == ']' && E + 1 < L.size() && L[E + 1] == ' ') {
      Cursor C{L.substr(P + 1, E - P - 1)};
      uint64_t V;
      if (!C.dec(V) || V >= XT_MAX_CPUS) {
        Why = fmt::format("CPU number beyond {}", XT_MAX_CPUS - 1);
        return false;
      }
      Cpu = unsigned(V);
      P = E + 1;
      break;
    }
    ++P;
  }
  Cursor C{L, P};
  C.spaces();
  // The irq-flags column (5 characters, e.g. "d..1."), when ftrace prints it: a word that
  // does not end with ':'.
  std::string_view W = C.word();
  if (W.empty() || W.back() != ':') {
    C.spaces();
    W = C.word();
  }
  if (W.size() < 2 || W.back() != ':') {
    Why = "no timestamp";
    return false;
  }
  Ts = W.substr(0, W.size() - 1);
  if (!C.lit(" ")) {
    Why = "no event name";
    return false;
  }
  size_t E = C.P;
  while (E < L.size() && isEventNameChar(L[E]))
    ++E;
  if (E == C.P || E >= L.size() || L[E] != ':') {
    Why = "no event name";
    return false;
  }
  Name = L.substr(C.P, E - C.P);
  Fields = L.substr(E + 1);
  if (!Fields.empty() && Fields.front() == ' ')
    Fields.remove_prefix(1);
  return true;
}

} // namespace

FtraceImportResult importFtrace(std::string_view Text, const std::string &Name, TraceOutput &Out) {
  FtraceImportResult Res;
  auto bad = [&](int Status, std::string Msg) {
    Res.Status = Status;
    Res.Problem = std::move(Msg);
    return Res;
  };
  std::vector<Rec> Recs;
  std::vector<uint64_t> LastTsc(XT_MAX_CPUS, 0);
  std::string Clock;    // the selected clock, once the clock line was seen
  bool VmxsimStart = false, VmxsimEnd = false;
  uint64_t LineNo = 0;
  size_t Pos = 0;
  while (Pos < Text.size()) {
    size_t End = Text.find('\n', Pos);
    if (End == std::string_view::npos)
      End = Text.size();
    std::string_view L = Text.substr(Pos, End - Pos);
    Pos = End + 1;
    ++LineNo;
    if (!L.empty() && L.back() == '\r')
      L.remove_suffix(1);
    const auto where = [&] { return fmt::format("{}:{}: ", Name, LineNo); };
    if (L.find_first_not_of(" \t") == std::string_view::npos)
      continue;
    if (L.front() == '#') {
      if (VmxsimEnd)
        return bad(kImportBadInput, where() + "a line after '# vmxsim-kvm trace end'");
      for (std::string_view Key : {"# vmxsim-kvm trace_clock:", "# trace_clock:"}) {
        if (L.substr(0, Key.size()) != Key)
          continue;
        const size_t Open = L.find('['), Close = L.find(']');
        if (Open == std::string_view::npos || Close < Open)
          return bad(kImportBadInput, where() + "the trace_clock line names no selected "
                                                "clock (the one in brackets)");
        Clock = std::string(L.substr(Open + 1, Close - Open - 1));
        VmxsimStart = Key[2] == 'v';
      }
      if (L == "# vmxsim-kvm trace end")
        VmxsimEnd = true;
      constexpr std::string_view Entries = "# entries-in-buffer/entries-written: ";
      if (L.substr(0, Entries.size()) == Entries) {
        Cursor C{L, Entries.size()};
        uint64_t In, Written;
        if (!C.dec(In) || !C.lit("/") || !C.dec(Written))
          return bad(kImportBadInput, where() + "malformed entries-in-buffer/entries-written");
        if (In != Written)
          return bad(kImportBadInput,
                     where() + fmt::format("ftrace lost {} of {} events (its ring buffer was "
                                           "overwritten: a larger buffer_size_kb)",
                                           Written > In ? Written - In : 0, Written));
      }
      continue;
    }
    if (VmxsimEnd)
      return bad(kImportBadInput, where() + "a line after '# vmxsim-kvm trace end'");
    if (Clock.empty())
      return bad(kImportWrongClock,
                 where() + "an event before any '# vmxsim-kvm trace_clock: ...' line: the "
                           "trace does not say its clock (it must be x86-tsc)");
    if (Clock != "x86-tsc")
      return bad(kImportWrongClock,
                 fmt::format("{}: the trace's clock is {}, not x86-tsc (the TSC): its "
                             "timestamps cannot be compared with the virtual TSC",
                             Name, Clock));
    // ftrace's own line when a CPU's ring buffer overran: "CPU:N [LOST M EVENTS]".
    if (L.substr(0, 4) == "CPU:" && L.find("[LOST ") != std::string_view::npos)
      return bad(kImportBadInput, where() + fmt::format("ftrace lost events: '{}' (its ring "
                                                        "buffer was overwritten: a larger "
                                                        "buffer_size_kb)",
                                                        L));
    unsigned Cpu;
    std::string_view Ts, Event, Fields;
    std::string Why;
    if (!splitLine(L, Cpu, Ts, Event, Fields, Why))
      return bad(kImportBadInput, where() + "malformed event line: " + Why);
    Rec R;
    R.Cpu = Cpu;
    {
      Cursor C{Ts};
      if (Ts.find('.') != std::string_view::npos)
        return bad(kImportWrongClock,
                   where() + "a timestamp in seconds: the trace's clock is not x86-tsc");
      if (!C.dec(R.Tsc) || !C.done())
        return bad(kImportBadInput, where() + fmt::format("malformed timestamp '{}'", Ts));
    }
    if (R.Tsc < LastTsc[Cpu])
      return bad(kImportBadInput, where() + fmt::format("the timestamp goes back on cpu {}",
                                                        Cpu));
    LastTsc[Cpu] = R.Tsc;
    ++Res.Events;
    Res.Cpus = std::max(Res.Cpus, Cpu + 1);
    const auto *P = std::find_if(std::begin(kParsers), std::end(kParsers),
                                 [&](const EventParser &E) { return E.Name == Event; });
    if (P == std::end(kParsers)) {
      ++Res.Unknown;
      ++Res.UnknownByName[std::string(Event)];
      R.Event = XT_EV_KvmOther;
      set(R.Words, R.NumWords, {uint32_t(std::min<uint64_t>(LineNo, 0xffffffffu))});
    } else {
      Cursor C{Fields};
      // Trailing spaces are ftrace's (kvm_pio ends with "%s"); all else must parse.
      while (!C.S.empty() && C.S.back() == ' ')
        C.S.remove_suffix(1);
      if (!P->Parse(C, R) || !C.done())
        return bad(kImportBadInput,
                   where() + fmt::format("malformed {} fields: '{}'", Event, Fields));
      if (R.Event == XT_EV_VmxExit64)
        ++Res.Exits;
      else if (R.Event == XT_EV_VmEntry)
        ++Res.Entries;
      else
        ++Res.Handlers;
    }
    Recs.push_back(R);
  }
  if (Clock.empty())
    return bad(kImportWrongClock, fmt::format("{}: no '# vmxsim-kvm trace_clock: ...' line: "
                                              "the trace does not say its clock (it must be "
                                              "x86-tsc)",
                                              Name));
  if (Clock != "x86-tsc")
    return bad(kImportWrongClock,
               fmt::format("{}: the trace's clock is {}, not x86-tsc (the TSC): its timestamps "
                           "cannot be compared with the virtual TSC",
                           Name, Clock));
  if (VmxsimStart && !VmxsimEnd)
    return bad(kImportBadInput, fmt::format("{}: no '# vmxsim-kvm trace end' line: the trace "
                                            "was cut short",
                                            Name));
  if (Res.Events == 0)
    return bad(kImportBadInput, fmt::format("{}: no events", Name));

  TraceWriter W(Out, Res.Cpus);
  W.record(0, XT_EV_KvmFtrace,
           {uint32_t(std::min<uint64_t>(Res.Events, 0xffffffffu)),
            uint32_t(std::min<uint64_t>(Res.Unknown, 0xffffffffu)), Res.Cpus});
  for (const Rec &R : Recs) {
    W.recordTsc(R.Cpu, R.Event, R.Tsc, R.Words, R.NumWords);
    if (R.InfoEvent)
      W.record(R.Cpu, R.InfoEvent, R.Info, R.InfoWords);
  }
  W.flush();
  if (!W.ok())
    return bad(kImportBadInput, Out.failure().empty() ? "cannot write the trace" : Out.failure());
  return Res;
}

void printImport(const FtraceImportResult &R, std::FILE *Out) {
  fmt::print(Out, "imported {} events on {} cpu(s): {} kvm_exit, {} kvm_entry, {} handler "
                  "events, {} unknown\n",
             R.Events, R.Cpus, R.Exits, R.Entries, R.Handlers, R.Unknown);
  for (const auto &[Name, Count] : R.UnknownByName)
    fmt::print(Out, "  unknown event {} x{} (kept as KVM_OTHER)\n", Name, Count);
}

int traceImportFtraceCommand(const std::string &In, const std::string &OutPath, std::FILE *Out,
                             std::FILE *Err) {
  const std::optional<std::string> Text = readImportInput(In, Err);
  if (!Text)
    return kImportBadInput;
  // Parse first (into memory), then create the output: a bad input leaves no file.
  MemoryOutput Mem;
  const FtraceImportResult R = importFtrace(*Text, In, Mem);
  if (R.Status) {
    fmt::print(Err, "vmxsim: error: {}\n", R.Problem);
    return R.Status;
  }
  if (!writeImportOutput(OutPath, Mem.Bytes.data(), Mem.Bytes.size(), Err))
    return kImportBadInput;
  printImport(R, Out);
  return 0;
}

} // namespace vmxsim::trace
