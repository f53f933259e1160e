// The gdb stub's packet handling (harness/gdb_stub.h). Packets and replies are those of
// the GDB manual's "Remote Protocol" appendix ("Packets", "Stop Reply Packets", "General
// Query Packets", "Target Descriptions"). Errors: E01 a malformed packet (bad number,
// truncated or odd hex, a length that does not match the data), E02 no such thread,
// E03 no such register, E14 memory that is not mapped by the CPU's paging or not RAM,
// E05 the run has ended. Unknown packets get the empty reply.
#include "harness/gdb_stub.h"

#include "cpu/vmx/vmcs.h"
#include "cpu/vmx/vmx_state.h"
#include "trace/dump.h"
#include "trace/vmx_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <strings.h>

namespace vmxsim {

using namespace gdb;

namespace {

// --- The register file gdb sees: one table, from which the target description, 'g',
// 'G', 'p' and 'P' all come. ---

enum class Feature : uint8_t { Core, Sse, Segments, Control };

struct RegInfo {
  const char *Name;
  unsigned Bits;
  const char *Type;
  const char *Group; ///< null: gdb's default for the type
  Feature F;
};

constexpr RegInfo kRegs[] = {
    {"rax", 64, "int64", nullptr, Feature::Core},
    {"rbx", 64, "int64", nullptr, Feature::Core},
    {"rcx", 64, "int64", nullptr, Feature::Core},
    {"rdx", 64, "int64", nullptr, Feature::Core},
    {"rsi", 64, "int64", nullptr, Feature::Core},
    {"rdi", 64, "int64", nullptr, Feature::Core},
    {"rbp", 64, "data_ptr", nullptr, Feature::Core},
    {"rsp", 64, "data_ptr", nullptr, Feature::Core},
    {"r8", 64, "int64", nullptr, Feature::Core},
    {"r9", 64, "int64", nullptr, Feature::Core},
    {"r10", 64, "int64", nullptr, Feature::Core},
    {"r11", 64, "int64", nullptr, Feature::Core},
    {"r12", 64, "int64", nullptr, Feature::Core},
    {"r13", 64, "int64", nullptr, Feature::Core},
    {"r14", 64, "int64", nullptr, Feature::Core},
    {"r15", 64, "int64", nullptr, Feature::Core},
    {"rip", 64, "code_ptr", nullptr, Feature::Core},
    {"eflags", 32, "i386_eflags", nullptr, Feature::Core},
    {"cs", 32, "int32", nullptr, Feature::Core},
    {"ss", 32, "int32", nullptr, Feature::Core},
    {"ds", 32, "int32", nullptr, Feature::Core},
    {"es", 32, "int32", nullptr, Feature::Core},
    {"fs", 32, "int32", nullptr, Feature::Core},
    {"gs", 32, "int32", nullptr, Feature::Core},
    {"st0", 80, "i387_ext", nullptr, Feature::Core},
    {"st1", 80, "i387_ext", nullptr, Feature::Core},
    {"st2", 80, "i387_ext", nullptr, Feature::Core},
    {"st3", 80, "i387_ext", nullptr, Feature::Core},
    {"st4", 80, "i387_ext", nullptr, Feature::Core},
    {"st5", 80, "i387_ext", nullptr, Feature::Core},
    {"st6", 80, "i387_ext", nullptr, Feature::Core},
    {"st7", 80, "i387_ext", nullptr, Feature::Core},
    {"fctrl", 32, "int", "float", Feature::Core},
    {"fstat", 32, "int", "float", Feature::Core},
    {"ftag", 32, "int", "float", Feature::Core},
    {"fiseg", 32, "int", "float", Feature::Core},
    {"fioff", 32, "int", "float", Feature::Core},
    {"foseg", 32, "int", "float", Feature::Core},
    {"fooff", 32, "int", "float", Feature::Core},
    {"fop", 32, "int", "float", Feature::Core},
    {"xmm0", 128, "vec128", nullptr, Feature::Sse},
    {"xmm1", 128, "vec128", nullptr, Feature::Sse},
    {"xmm2", 128, "vec128", nullptr, Feature::Sse},
    {"xmm3", 128, "vec128", nullptr, Feature::Sse},
    {"xmm4", 128, "vec128", nullptr, Feature::Sse},
    {"xmm5", 128, "vec128", nullptr, Feature::Sse},
    {"xmm6", 128, "vec128", nullptr, Feature::Sse},
    {"xmm7", 128, "vec128", nullptr, Feature::Sse},
    {"xmm8", 128, "vec128", nullptr, Feature::Sse},
    {"xmm9", 128, "vec128", nullptr, Feature::Sse},
    {"xmm10", 128, "vec128", nullptr, Feature::Sse},
    {"xmm11", 128, "vec128", nullptr, Feature::Sse},
    {"xmm12", 128, "vec128", nullptr, Feature::Sse},
    {"xmm13", 128, "vec128", nullptr, Feature::Sse},
    {"xmm14", 128, "vec128", nullptr, Feature::Sse},
    {"xmm15", 128, "vec128", nullptr, Feature::Sse},
    {"mxcsr", 32, "int", "vector", Feature::Sse},
    {"fs_base", 64, "int", nullptr, Feature::Segments},
    {"gs_base", 64, "int", nullptr, Feature::Segments},
    {"cr0", 64, "int64", "general", Feature::Control},
    {"cr2", 64, "int64", "general", Feature::Control},
    {"cr3", 64, "int64", "general", Feature::Control},
    {"cr4", 64, "int64", "general", Feature::Control},
    {"cr8", 64, "int64", "general", Feature::Control},
    {"efer", 64, "int64", "general", Feature::Control},
};
constexpr unsigned kNumRegs = sizeof(kRegs) / sizeof(kRegs[0]);
constexpr unsigned kRegSt0 = 24, kRegFctrl = 32, kRegXmm0 = 40, kRegMxcsr = 56,
                   kRegFsBase = 57, kRegCr0 = 59;
static_assert(kNumRegs == 65 && kRegs[kRegSt0].Bits == 80 && kRegs[kRegXmm0].Bits == 128 &&
              kRegs[kRegFsBase].F == Feature::Segments && kRegs[kRegCr0].F == Feature::Control);

/// gdb's order of the first eight general registers, as indexes of CpuState::Gpr.
constexpr unsigned kGprOrder[8] = {0, 3, 1, 2, 6, 7, 5, 4};
/// gdb's segment order (cs, ss, ds, es, fs, gs) as indexes of CpuState::Seg (SegReg:
/// es, cs, ss, ds, fs, gs).
constexpr unsigned kSegOrder[6] = {1, 2, 3, 0, 4, 5};

/// The full x87 tag word from the abridged one (SDM Vol. 1, "x87 FPU Tag Word"; the
/// FXSAVE format's "Abridged FPU Tag Word"): 11 empty, else 01 zero, 10 special (NaN,
/// infinity, denormal, unsupported), 00 valid, by each physical register's contents.
uint32_t fullTagWord(const CpuState &S) {
  const unsigned Top = (S.Fsw >> 11) & 7;
  uint32_t Tags = 0;
  for (unsigned P = 0; P < 8; ++P) {
    unsigned Tag = 3;
    if (S.Ftw & (1u << P)) {
      const uint8_t *R = S.St[(P - Top) & 7];
      uint64_t Mant;
      std::memcpy(&Mant, R, 8);
      const unsigned Exp = (unsigned(R[9] & 0x7f) << 8) | R[8];
      if (Exp == 0 && Mant == 0)
        Tag = 1;
      else if (Exp == 0x7fff || Exp == 0 || !(Mant >> 63))
        Tag = 2;
      else
        Tag = 0;
    }
    Tags |= Tag << (2 * P);
  }
  return Tags;
}

/// Register N of S as its little-endian bytes.
std::string regBytes(const CpuState &S, unsigned N) {
  std::string B(kRegs[N].Bits / 8, '\0');
  auto Put = [&](uint64_t V) {
    for (unsigned I = 0; I < B.size() && I < 8; ++I)
      B[I] = char(V >> (8 * I));
  };
  if (N < 8)
    Put(S.Gpr[kGprOrder[N]]);
  else if (N < 16)
    Put(S.Gpr[N]);
  else if (N == 16)
    Put(S.Rip);
  else if (N == 17)
    Put(S.Rflags);
  else if (N < kRegSt0)
    Put(S.Seg[kSegOrder[N - 18]].Selector);
  else if (N < kRegFctrl)
    B.assign(reinterpret_cast<const char *>(S.St[N - kRegSt0]), 10);
  else if (N < kRegXmm0) {
    const uint64_t Fpu[8] = {S.Fcw, S.Fsw, fullTagWord(S), 0, S.Fip & 0xffffffff, 0,
                             S.Fdp & 0xffffffff, S.Fop};
    Put(Fpu[N - kRegFctrl]);
  } else if (N < kRegMxcsr) {
    const Xmm &X = S.XmmReg[N - kRegXmm0];
    for (unsigned I = 0; I < 8; ++I) {
      B[I] = char(X.Lo >> (8 * I));
      B[8 + I] = char(X.Hi >> (8 * I));
    }
  } else if (N == kRegMxcsr)
    Put(S.Mxcsr);
  else if (N < kRegCr0)
    Put(S.Seg[4 + (N - kRegFsBase)].Base);
  else {
    const uint64_t Cr[6] = {S.Cr0, S.Cr2, S.Cr3, S.Cr4, S.Cr8, S.Efer};
    Put(Cr[N - kRegCr0]);
  }
  return B;
}

/// Sets register N of S from its little-endian bytes (B holds exactly its size). A
/// segment register's selector only: its hidden parts stay as they are.
void setRegBytes(CpuState &S, unsigned N, const std::string &B) {
  uint64_t V = 0;
  for (unsigned I = 0; I < B.size() && I < 8; ++I)
    V |= uint64_t(uint8_t(B[I])) << (8 * I);
  if (N < 8)
    S.Gpr[kGprOrder[N]] = V;
  else if (N < 16)
    S.Gpr[N] = V;
  else if (N == 16)
    S.Rip = V;
  else if (N == 17)
    S.Rflags = V;
  else if (N < kRegSt0)
    S.Seg[kSegOrder[N - 18]].Selector = uint16_t(V);
  else if (N < kRegFctrl)
    std::memcpy(S.St[N - kRegSt0], B.data(), 10);
  else if (N < kRegXmm0) {
    switch (N - kRegFctrl) {
    case 0:
      S.Fcw = uint16_t(V);
      break;
    case 1:
      S.Fsw = uint16_t(V);
      break;
    case 2: { // back to the abridged form: a register is in use unless tagged 11
      uint16_t Ftw = 0;
      for (unsigned P = 0; P < 8; ++P)
        if (((V >> (2 * P)) & 3) != 3)
          Ftw |= uint16_t(1u << P);
      S.Ftw = Ftw;
      break;
    }
    case 4:
      S.Fip = V;
      break;
    case 6:
      S.Fdp = V;
      break;
    case 7:
      S.Fop = uint16_t(V);
      break;
    default: // fiseg, foseg: 0 in 64-bit mode
      break;
    }
  } else if (N < kRegMxcsr) {
    Xmm &X = S.XmmReg[N - kRegXmm0];
    X.Lo = X.Hi = 0;
    for (unsigned I = 0; I < 8; ++I) {
      X.Lo |= uint64_t(uint8_t(B[I])) << (8 * I);
      X.Hi |= uint64_t(uint8_t(B[8 + I])) << (8 * I);
    }
  } else if (N == kRegMxcsr)
    S.Mxcsr = uint32_t(V);
  else if (N < kRegCr0)
    S.Seg[4 + (N - kRegFsBase)].Base = V;
  else {
    uint64_t *Cr[6] = {&S.Cr0, &S.Cr2, &S.Cr3, &S.Cr4, &S.Cr8, &S.Efer};
    *Cr[N - kRegCr0] = V;
  }
}

/// gdb's number of the register called Name, if there is one.
std::optional<unsigned> regByName(std::string_view Name) {
  for (unsigned N = 0; N < kNumRegs; ++N)
    if (Name == kRegs[N].Name)
      return N;
  return std::nullopt;
}

/// G's payload (whole registers in gdb's order, all of them or the first ones) into S;
/// false when it does not end at a register's end.
bool setRegsFromG(CpuState &S, const std::string &Bytes) {
  size_t Off = 0;
  for (unsigned N = 0; N < kNumRegs && Off < Bytes.size(); ++N) {
    const size_t Size = kRegs[N].Bits / 8;
    if (Off + Size > Bytes.size())
      return false;
    setRegBytes(S, N, Bytes.substr(Off, Size));
    Off += Size;
  }
  return Off == Bytes.size();
}

/// The linear address of the instruction C executes next (SDM Vol. 3A, "Logical and
/// Linear Addresses": CS's base is 0 in 64-bit mode).
uint64_t nextInsnLinear(const Cpu &C) {
  return C.S.in64BitMode() ? C.S.Rip : (C.S.cs().Base + C.S.Rip) & 0xffffffffu;
}

std::string threadId(unsigned Cpu) { return fmt::format("{:02x}", Cpu + 1); }

/// Splits "a,b" (or "a,b:rest") into numbers.
bool parseAddrLen(std::string_view S, uint64_t &Addr, uint64_t &Len) {
  const size_t Comma = S.find(',');
  if (Comma == std::string_view::npos)
    return false;
  auto A = parseHexNumber(S.substr(0, Comma));
  auto L = parseHexNumber(S.substr(Comma + 1));
  if (!A || !L)
    return false;
  Addr = *A;
  Len = *L;
  return true;
}

std::optional<uint32_t> exitReasonByName(const std::string &Name) {
  if (!Name.empty() && Name.size() <= 5 &&
      Name.find_first_not_of("0123456789") == std::string::npos) {
    const uint32_t Number = uint32_t(std::strtoul(Name.c_str(), nullptr, 10));
    if (trace::exitReasonName(Number))
      return Number;
    return std::nullopt;
  }
  for (uint32_t R = 0; R < 256; ++R) {
    const char *Sdm = trace::exitReasonName(R), *Enum = trace::exitReasonEnumName(R);
    if ((Sdm && strcasecmp(Sdm, Name.c_str()) == 0) ||
        (Enum && strcasecmp(Enum, Name.c_str()) == 0))
      return R;
  }
  return std::nullopt;
}

/// Output of a monitor command as O packets of at most 512 bytes of text each.
void addOutput(std::vector<std::string> &Packets, const std::string &Text) {
  for (size_t I = 0; I < Text.size(); I += 512)
    Packets.push_back("O" + toHex(std::string_view(Text).substr(I, 512)));
}

const char kMonitorHelp[] =
    "vmxsim monitor commands:\n"
    "  monitor exit [REASON]  run until the next VM exit (of REASON: a name of\n"
    "                         cpu/vmx/exit_reasons.def such as CPUID or Cpuid, or a number)\n"
    "  monitor entry          run until the next completed VM entry\n"
    "  monitor vmcs           the selected CPU's current VMCS, every field by name\n"
    "  monitor trace N        the last N records of the ground truth and the hypervisor's trace\n"
    "  monitor snapshot save FILE     save the whole machine (README.md, \"Snapshots\")\n"
    "  monitor snapshot restore FILE  go back to a saved machine\n"
    "  monitor help           this text\n"
    "Breakpoints, watchpoints and Ctrl-C also end an exit/entry run. The stop is\n"
    "reported here, not to gdb, which keeps showing the registers it read before:\n"
    "`maint flush register-cache` makes it read them again.\n";

} // namespace

// --- GdbStub ---

GdbStub::GdbStub(Machine &M) : M(M) { noteSeen(); }

void GdbStub::reset() {
  NoAck = false;
  GCpu = CCpu = 0;
  CAll = true;
  Breaks.clear();
  Watches.clear();
}

void GdbStub::attached(unsigned Cpu) {
  reset();
  noteSeen();
  GCpu = CCpu = Cpu < M.numCpus() ? Cpu : 0;
  LastStop = End ? "" : fmt::format("T05thread:{};", threadId(GCpu));
}

void GdbStub::noteSeen() {
  Seen.resize(M.numCpus());
  for (unsigned I = 0; I < M.numCpus(); ++I)
    Seen[I] = {M.cpu(I).Retired, M.cpu(I).S.Rip};
}

std::string GdbStub::stopReply() const {
  if (End)
    return fmt::format("W{:02x}", End->ExitStatus & 0xff);
  return LastStop.empty() ? fmt::format("T05thread:{};", threadId(GCpu)) : LastStop;
}

std::string GdbStub::targetXml() {
  std::string X = "<?xml version=\"1.0\"?>\n<target version=\"1.0\">\n"
                  "<architecture>i386:x86-64</architecture>\n";
  static const char *const Names[] = {"org.gnu.gdb.i386.core", "org.gnu.gdb.i386.sse",
                                      "org.gnu.gdb.i386.segments", "org.vmxsim.x86.control"};
  for (unsigned F = 0; F < 4; ++F) {
    X += fmt::format("<feature name=\"{}\">\n", Names[F]);
    if (F == 0) {
      X += "<flags id=\"i386_eflags\" size=\"4\">\n";
      static const std::pair<const char *, unsigned> Bits[] = {
          {"CF", 0},  {"", 1},    {"PF", 2},  {"AF", 4},  {"ZF", 6},   {"SF", 7},
          {"TF", 8},  {"IF", 9},  {"DF", 10}, {"OF", 11}, {"NT", 14},  {"RF", 16},
          {"VM", 17}, {"AC", 18}, {"VIF", 19}, {"VIP", 20}, {"ID", 21}};
      for (auto [Name, Bit] : Bits)
        X += fmt::format("  <field name=\"{}\" start=\"{}\" end=\"{}\"/>\n", Name, Bit, Bit);
      X += "</flags>\n";
    }
    if (F == 1) {
      X += "<vector id=\"v4f\" type=\"ieee_single\" count=\"4\"/>\n"
           "<vector id=\"v2d\" type=\"ieee_double\" count=\"2\"/>\n"
           "<vector id=\"v16i8\" type=\"int8\" count=\"16\"/>\n"
           "<vector id=\"v8i16\" type=\"int16\" count=\"8\"/>\n"
           "<vector id=\"v4i32\" type=\"int32\" count=\"4\"/>\n"
           "<vector id=\"v2i64\" type=\"int64\" count=\"2\"/>\n"
           "<union id=\"vec128\">\n"
           "  <field name=\"v4_float\" type=\"v4f\"/>\n"
           "  <field name=\"v2_double\" type=\"v2d\"/>\n"
           "  <field name=\"v16_int8\" type=\"v16i8\"/>\n"
           "  <field name=\"v8_int16\" type=\"v8i16\"/>\n"
           "  <field name=\"v4_int32\" type=\"v4i32\"/>\n"
           "  <field name=\"v2_int64\" type=\"v2i64\"/>\n"
           "  <field name=\"uint128\" type=\"uint128\"/>\n"
           "</union>\n";
    }
    for (unsigned N = 0; N < kNumRegs; ++N) {
      if (unsigned(kRegs[N].F) != F)
        continue;
      X += fmt::format("<reg name=\"{}\" bitsize=\"{}\" type=\"{}\" regnum=\"{}\"{}/>\n",
                       kRegs[N].Name, kRegs[N].Bits, kRegs[N].Type, N,
                       kRegs[N].Group ? fmt::format(" group=\"{}\"", kRegs[N].Group) : "");
    }
    X += "</feature>\n";
  }
  return X + "</target>\n";
}

std::string GdbStub::readRegisters(unsigned Cpu) const {
  const CpuState &S = M.cpu(Cpu).S;
  std::string Out;
  for (unsigned N = 0; N < kNumRegs; ++N)
    Out += toHex(regBytes(S, N));
  return Out;
}

std::optional<unsigned> GdbStub::threadCpu(std::string_view Id, bool AllowAny) const {
  if (Id == "-1" || Id == "0")
    return AllowAny ? std::optional<unsigned>(~0u) : std::nullopt;
  auto T = parseHexNumber(Id);
  if (!T || *T == 0 || *T > M.numCpus())
    return std::nullopt;
  return unsigned(*T - 1);
}

GdbStub::Stop GdbStub::stopAt(unsigned Id, int Signal, const std::string &Why,
                              const std::string &Text) {
  noteSeen();
  GCpu = Id; // gdb makes the stopped thread current
  LastStop = fmt::format("T{:02x}thread:{};{}", Signal, threadId(Id), Why);
  const Cpu &C = M.cpu(Id);
  return {LastStop, fmt::format("CPU {} stopped: {} at RIP={:#x} ({} instructions retired)\n",
                                Id, Text, C.S.Rip, C.Retired), false};
}

GdbStub::Stop GdbStub::runOver(const RunResult &R) {
  End = R;
  Breaks.clear();
  Watches.clear();
  return {stopReply(), fmt::format("the run ended: {}\n", R.describe()), false};
}

GdbStub::Stop GdbStub::resume(std::optional<unsigned> StepCpu,
                              const std::vector<StopWhen> &Events) {
  if (End)
    return {stopReply(), "the run has ended\n", false};
  std::vector<StopWhen> Conds;
  std::vector<Meaning> Means;
  for (auto [Addr, Kinds] : Breaks) {
    Conds.push_back(StopWhen::execute(Gla(Addr)));
    Means.push_back({Meaning::Kind::Break, Addr, !(Kinds & 1)});
  }
  for (const Watch &W : Watches)
    for (auto [Base, Size] : W.Pieces) {
      Conds.push_back(W.Type == '2'   ? StopWhen::write(Hpa(Base), Size)
                      : W.Type == '3' ? StopWhen::read(Hpa(Base), Size)
                                      : StopWhen::access(Hpa(Base), Size));
      Means.push_back({Meaning::Kind::Watch, W.La, false, W.Type});
    }
  if (StepCpu) {
    // One instruction of the CPU, or the VM exit or entry it makes first (an exiting
    // instruction retires nothing: the step ends at the host's first instruction).
    Conds.push_back(StopWhen::instructions(1).onCpu(*StepCpu));
    Conds.push_back(StopWhen::vmExit().onCpu(*StepCpu));
    Conds.push_back(StopWhen::vmEntry().onCpu(*StepCpu));
    Means.insert(Means.end(), 3, Meaning{Meaning::Kind::Step});
  }
  for (const StopWhen &E : Events) {
    Conds.push_back(E);
    Means.push_back({Meaning::Kind::Event});
  }
  Conds.push_back(StopWhen::instructions(kChunkInsns));
  Means.push_back({Meaning::Kind::Chunk});

  for (;;) {
    // A CPU that reached a breakpoint's address at the end of a chunk (or that another
    // CPU's stop left there) would not be held by the next runUntil, which lets every CPU
    // start where it stands: stop it here, unless gdb has seen it there already.
    for (unsigned I = 0; I < M.numCpus(); ++I) {
      const Cpu &C = M.cpu(I);
      if (C.waiting() || (Seen[I].first == C.Retired && Seen[I].second == C.S.Rip))
        continue;
      auto B = Breaks.find(nextInsnLinear(C));
      if (B != Breaks.end())
        return stopAt(I, 5, (B->second & 1) ? "swbreak:;" : "hwbreak:;",
                      fmt::format("breakpoint at {:#x}", B->first));
    }
    ErrorOr<RunResult> R = M.runUntil(Conds);
    if (!R) // the conditions are built valid: this is a stub bug, reported, not hidden
      return stopAt(GCpu, 5, "", "run control refused the conditions: " + R.error().str());
    if (R->Reason != RunReason::Stopped)
      return runOver(*R);
    const Meaning &Mn = Means[R->Condition];
    switch (Mn.K) {
    case Meaning::Kind::Chunk: {
      const ClientState St = Poll ? Poll() : ClientState::Quiet;
      if (St == ClientState::Gone) {
        noteSeen();
        return {"", "", true};
      }
      if (St == ClientState::Interrupt)
        return stopAt(R->CpuId, 2, "", "interrupted");
      continue;
    }
    case Meaning::Kind::Break:
      return stopAt(R->CpuId, 5, Mn.Hardware ? "hwbreak:;" : "swbreak:;",
                    fmt::format("breakpoint at {:#x}", Mn.Addr));
    case Meaning::Kind::Watch: {
      // The stop reply names the watchpoint's kind and its address (the gdb remote
      // protocol, "Stop Reply Packets": watch, rwatch, awatch).
      const char *Reason = Mn.WatchType == '2'   ? "watch"
                           : Mn.WatchType == '3' ? "rwatch"
                                                 : "awatch";
      const char *What = Mn.WatchType == '2'   ? "write to"
                         : Mn.WatchType == '3' ? "read of"
                                               : "access to";
      return stopAt(R->CpuId, 5, fmt::format("{}:{:x};", Reason, Mn.Addr),
                    fmt::format("{} the watched {:#x}", What, Mn.Addr));
    }
    case Meaning::Kind::Step:
      return stopAt(*StepCpu, 5, "", "after one step");
    case Meaning::Kind::Event:
      return stopAt(R->CpuId, 5, "", R->What);
    }
  }
}

GdbStub::Reply GdbStub::breakpoint(bool Insert, std::string_view Args) {
  // "TYPE,ADDR,KIND" (conditions after ';' are not offered and ignored).
  Args = Args.substr(0, Args.find(';'));
  if (Args.size() < 2 || Args[1] != ',')
    return {{"E01"}};
  const char Type = Args[0];
  uint64_t Addr, Kind;
  if (!parseAddrLen(Args.substr(2), Addr, Kind))
    return {{"E01"}};
  if (End)
    return {{"E05"}};
  switch (Type) {
  case '0':
  case '1': {
    const uint8_t Bit = Type == '0' ? 1 : 2;
    if (Insert)
      Breaks[Addr] |= Bit;
    else if (auto I = Breaks.find(Addr); I != Breaks.end() && !(I->second &= uint8_t(~Bit)))
      Breaks.erase(I);
    return {{"OK"}};
  }
  case '2':   // write watchpoint
  case '3':   // read watchpoint
  case '4': { // access watchpoint
    if (!Insert) {
      auto I = std::find_if(Watches.begin(), Watches.end(), [&](const Watch &W) {
        return W.Type == Type && W.La == Addr && W.Len == Kind;
      });
      if (I != Watches.end())
        Watches.erase(I);
      return {{"OK"}};
    }
    // Any length and alignment up to kMaxWatchBytes (KIND is the length in bytes): the
    // run control's ranges have no debug register's limits.
    if (Kind == 0 || Kind > kMaxWatchBytes || Addr + Kind - 1 < Addr)
      return {{"E01"}};
    // Translated now, through the selected CPU's paging: the watch stays on those
    // physical bytes (StopWhen::write, read or access by Hpa), whoever accesses them.
    Watch W{Type, Addr, Kind, {}};
    uint64_t A = Addr, Left = Kind;
    while (Left) {
      const uint64_t Chunk = std::min(Left, kPageSize - (A & (kPageSize - 1)));
      ErrorOr<Hpa> Pa = M.translate(GCpu, Gla(A));
      std::string Probe(Chunk, '\0'); // only RAM can be watched (MMIO is a device's)
      if (!Pa || M.readPhysical(*Pa, Probe.data(), Chunk))
        return {{"E14"}};
      W.Pieces.push_back({Pa->value(), Chunk});
      A += Chunk;
      Left -= Chunk;
    }
    Watches.push_back(std::move(W));
    return {{"OK"}};
  }
  default: // no other type exists
    return {{""}};
  }
}

GdbStub::Reply GdbStub::vCont(std::string_view Args) {
  if (Args == "?")
    return {{"vCont;c;C;s;S"}};
  if (Args.empty() || Args[0] != ';')
    return {{"E01"}};
  // All-stop: every CPU runs (the scheduler's order is the run's); a step action names
  // the CPU whose one instruction ends the run.
  std::optional<unsigned> Step;
  size_t Pos = 1;
  while (Pos <= Args.size()) {
    size_t Next = Args.find(';', Pos);
    if (Next == std::string_view::npos)
      Next = Args.size();
    std::string_view Act = Args.substr(Pos, Next - Pos);
    const size_t Colon = Act.find(':');
    std::string_view Name = Act.substr(0, Colon);
    std::optional<unsigned> Cpu;
    if (Colon != std::string_view::npos) {
      Cpu = threadCpu(Act.substr(Colon + 1), true);
      if (!Cpu)
        return {{"E02"}};
    }
    if (Name.empty())
      return {{"E01"}};
    const char A = Name[0];
    if ((A == 'C' || A == 'S') && (Name.size() != 3 || !parseHexNumber(Name.substr(1))))
      return {{"E01"}};
    if ((A == 'c' || A == 's') && Name.size() != 1)
      return {{"E01"}};
    if (A != 'c' && A != 'C' && A != 's' && A != 'S')
      return {{"E01"}};
    if ((A == 's' || A == 'S') && !Step)
      Step = (!Cpu || *Cpu == ~0u) ? GCpu : *Cpu;
    Pos = Next + 1;
  }
  Stop S = resume(Step, {});
  if (S.Gone)
    return {{}, Reply::Then::Gone};
  return {{S.Reply}};
}

GdbStub::Reply GdbStub::xfer(std::string_view Args) {
  // "OBJECT:read:ANNEX:OFFSET,LENGTH"
  std::string Doc;
  if (Args.rfind("features:read:target.xml:", 0) == 0) {
    Doc = targetXml();
    Args.remove_prefix(std::strlen("features:read:target.xml:"));
  } else if (Args.rfind("threads:read::", 0) == 0) {
    Doc = "<?xml version=\"1.0\"?>\n<threads>\n";
    for (unsigned I = 0; I < M.numCpus(); ++I)
      Doc += fmt::format("<thread id=\"{}\" core=\"{}\" name=\"CPU {}\"/>\n", threadId(I), I, I);
    Doc += "</threads>\n";
    Args.remove_prefix(std::strlen("threads:read::"));
  } else if (Args.rfind("features:read:", 0) == 0) {
    return {{"E00"}}; // an annex we do not have
  } else {
    return {{""}};
  }
  uint64_t Off, Len;
  if (!parseAddrLen(Args, Off, Len))
    return {{"E01"}};
  Len = std::min<uint64_t>(Len, kMaxPacketBytes - 1);
  if (Off >= Doc.size())
    return {{"l"}};
  const std::string Part = Doc.substr(size_t(Off), size_t(Len));
  return {{(Off + Part.size() >= Doc.size() ? "l" : "m") + Part}};
}

GdbStub::Reply GdbStub::monitor(const std::string &Command) {
  std::vector<std::string> Words;
  for (size_t I = 0; I < Command.size();) {
    const size_t B = Command.find_first_not_of(" \t", I);
    if (B == std::string::npos)
      break;
    const size_t E = std::min(Command.find_first_of(" \t", B), Command.size());
    Words.push_back(Command.substr(B, E - B));
    I = E;
  }
  Reply Out;
  const std::string Cmd = Words.empty() ? "help" : Words[0];
  if (Cmd == "help") {
    addOutput(Out.Packets, kMonitorHelp);
  } else if (Cmd == "exit" || Cmd == "entry") {
    StopWhen W = Cmd == "exit" ? StopWhen::vmExit() : StopWhen::vmEntry();
    if (Words.size() > 2 || (Cmd == "entry" && Words.size() > 1)) {
      addOutput(Out.Packets, fmt::format("usage: monitor {}\n", Cmd == "exit" ? "exit [REASON]"
                                                                               : "entry"));
    } else if (Words.size() == 2 && !exitReasonByName(Words[1])) {
      addOutput(Out.Packets,
                fmt::format("no exit reason \"{}\" (cpu/vmx/exit_reasons.def)\n", Words[1]));
    } else {
      if (Words.size() == 2)
        W = W.reason(ExitReason(*exitReasonByName(Words[1])));
      Stop S = resume(std::nullopt, {W});
      if (S.Gone)
        return {{}, Reply::Then::Gone};
      addOutput(Out.Packets, S.Text);
    }
  } else if (Cmd == "vmcs") {
    std::string Text;
    ErrorOr<uint64_t> First = M.readVmcs(GCpu, "ExitReason");
    if (!First && First.error().Code == ErrorCode::NoCurrentVmcs) {
      Text = First.error().Message + "\n";
    } else {
      Text = fmt::format("CPU {}: current VMCS at {:#x}\n", GCpu,
                         M.cpu(GCpu).Vmx->CurrentVmcsPointer);
      for (const VmcsFieldInfo &F : kVmcsFields)
        if (ErrorOr<uint64_t> V = M.readVmcs(GCpu, F.Name))
          Text += fmt::format("  {:<40} {:#x}\n", F.Name, *V);
    }
    addOutput(Out.Packets, Text);
  } else if (Cmd == "trace") {
    uint64_t N = 0;
    if (Words.size() != 2 || Words[1].find_first_not_of("0123456789") != std::string::npos ||
        Words[1].size() > 9 || (N = std::strtoull(Words[1].c_str(), nullptr, 10)) == 0) {
      addOutput(Out.Packets, "usage: monitor trace N (N >= 1)\n");
    } else {
      std::string Text;
      auto Show = [&](const char *What, ErrorOr<std::vector<trace::TraceRecord>> Recs) {
        if (!Recs) {
          Text += fmt::format("{}: {}\n", What, Recs.error().Message);
          return;
        }
        const size_t From = Recs->size() > N ? Recs->size() - size_t(N) : 0;
        Text += fmt::format("{}: the last {} of {} records\n", What, Recs->size() - From,
                            Recs->size());
        std::map<unsigned, uint64_t> LastTsc; // for each record's delta, as trace dump
        for (size_t I = 0; I < Recs->size(); ++I) {
          const trace::TraceRecord &R = (*Recs)[I];
          const uint64_t Delta = LastTsc.count(R.Cpu) ? R.Tsc - LastTsc[R.Cpu] : 0;
          if (R.HasTsc)
            LastTsc[R.Cpu] = R.Tsc;
          if (I >= From)
            Text += "  " + trace::formatRecord(R, Delta) + "\n";
        }
      };
      Show("ground truth", M.groundTruthRecords());
      Show("hypervisor trace", M.hypervisorTraceRecords());
      addOutput(Out.Packets, Text);
    }
  } else if (Cmd == "snapshot") {
    // Machine::saveSnapshot / restoreSnapshot (README.md, "Snapshots"). A restore rewinds
    // the machine; its outputs go on from where they are, so they then hold the run up to
    // the restore followed by the run from the snapshot.
    const bool Save = Words.size() == 3 && Words[1] == "save";
    const bool Load = Words.size() == 3 && Words[1] == "restore";
    if (!Save && !Load) {
      addOutput(Out.Packets, "usage: monitor snapshot save FILE | monitor snapshot restore FILE\n");
    } else if (Load && M.recordsInput()) {
      // The input log names points of one run; a restore would make it two.
      addOutput(Out.Packets, "snapshot: not while the run records its input (--record-input): "
                             "the log could not say where gdb's later writes came\n");
    } else if (Error E = Save ? M.saveSnapshot(Words[2]) : M.restoreSnapshot(Words[2])) {
      addOutput(Out.Packets, "snapshot: " + E.str() + "\n");
    } else {
      addOutput(Out.Packets,
                Save ? fmt::format("snapshot saved to {}\n", Words[2])
                     : fmt::format("machine restored from {}: CPU {} at RIP={:#x} ({} "
                                   "instructions retired); `maint flush register-cache` "
                                   "shows its registers in gdb\n",
                                   Words[2], GCpu, M.cpu(GCpu).S.Rip, M.cpu(GCpu).Retired));
    }
  } else {
    addOutput(Out.Packets, fmt::format("unknown monitor command \"{}\"; monitor help lists "
                                       "them\n",
                                       Cmd));
  }
  Out.Packets.push_back("OK");
  return Out;
}

GdbStub::Reply GdbStub::handle(std::string_view P) {
  if (P.empty())
    return {{""}};
  const char Kind = P[0];
  const std::string_view Args = P.substr(1);
  switch (Kind) {
  case '?':
    return {{stopReply()}};
  case 'g':
    if (End)
      return {{"E05"}};
    return {{readRegisters(GCpu)}};
  case 'G': {
    if (End)
      return {{"E05"}};
    auto Bytes = fromHex(Args);
    if (!Bytes)
      return {{"E01"}};
    CpuState S = M.cpu(GCpu).S;
    if (!setRegsFromG(S, *Bytes))
      return {{"E01"}};
    if (Bytes->empty())
      return {{"OK"}};
    M.logGdbWrite({GdbWrite::Kind::AllRegisters, GCpu, "", 0, *Bytes});
    (void)M.setRegisters(GCpu, S);
    return {{"OK"}};
  }
  case 'p': {
    auto N = parseHexNumber(Args);
    if (!N)
      return {{"E01"}};
    if (*N >= kNumRegs)
      return {{"E03"}};
    if (End)
      return {{"E05"}};
    return {{toHex(regBytes(M.cpu(GCpu).S, unsigned(*N)))}};
  }
  case 'P': {
    const size_t Eq = Args.find('=');
    auto N = parseHexNumber(Args.substr(0, Eq));
    if (Eq == std::string_view::npos || !N)
      return {{"E01"}};
    if (*N >= kNumRegs)
      return {{"E03"}};
    auto Bytes = fromHex(Args.substr(Eq + 1));
    if (!Bytes || Bytes->size() != kRegs[*N].Bits / 8)
      return {{"E01"}};
    if (End)
      return {{"E05"}};
    CpuState S = M.cpu(GCpu).S;
    setRegBytes(S, unsigned(*N), *Bytes);
    M.logGdbWrite({GdbWrite::Kind::Register, GCpu, kRegs[*N].Name, 0, *Bytes});
    (void)M.setRegisters(GCpu, S);
    return {{"OK"}};
  }
  case 'm': {
    uint64_t Addr, Len;
    if (!parseAddrLen(Args, Addr, Len))
      return {{"E01"}};
    if (End)
      return {{"E05"}};
    Len = std::min<uint64_t>(Len, (kMaxPacketBytes - 16) / 2);
    // Page by page: a read that runs into an unmapped page answers what it read before.
    std::string Data;
    uint64_t A = Addr;
    while (Data.size() < Len) {
      const uint64_t Chunk =
          std::min<uint64_t>(Len - Data.size(), kPageSize - (A & (kPageSize - 1)));
      std::string Piece(Chunk, '\0');
      if (M.readLinear(GCpu, Gla(A), Piece.data(), Chunk))
        break;
      Data += Piece;
      A += Chunk;
    }
    if (Data.empty() && Len)
      return {{"E14"}};
    return {{toHex(Data)}};
  }
  case 'M':
  case 'X': {
    const size_t Colon = Args.find(':');
    uint64_t Addr, Len;
    if (Colon == std::string_view::npos || !parseAddrLen(Args.substr(0, Colon), Addr, Len))
      return {{"E01"}};
    std::optional<std::string> Data;
    if (Kind == 'M')
      Data = fromHex(Args.substr(Colon + 1));
    else
      Data = std::string(Args.substr(Colon + 1)); // already unescaped
    if (!Data || Data->size() != Len)
      return {{"E01"}};
    if (End)
      return {{"E05"}};
    if (Len && M.writeLinear(GCpu, Gla(Addr), Data->data(), Len))
      return {{"E14"}};
    if (Len) // logged once made: a write that failed changed nothing
      M.logGdbWrite({GdbWrite::Kind::Memory, GCpu, "", Addr, *Data});
    return {{"OK"}};
  }
  case 'Z':
  case 'z':
    return breakpoint(Kind == 'Z', Args);
  case 'c':
  case 's':
  case 'C':
  case 'S': {
    // "c [ADDR]", "C SIG[;ADDR]": resuming at another address is not offered (use
    // `set $pc`); the signal is not delivered (there is no process to deliver it to).
    if (Args.find(';') != std::string_view::npos ||
        ((Kind == 'c' || Kind == 's') && !Args.empty()))
      return {{"E01"}};
    std::optional<unsigned> Step;
    if (Kind == 's' || Kind == 'S')
      Step = CAll ? GCpu : CCpu;
    Stop S = resume(Step, {});
    if (S.Gone)
      return {{}, Reply::Then::Gone};
    return {{S.Reply}};
  }
  case 'H': {
    if (Args.size() < 2 || (Args[0] != 'g' && Args[0] != 'c'))
      return {{"E01"}};
    auto Cpu = threadCpu(Args.substr(1), true);
    if (!Cpu)
      return {{"E02"}};
    if (Args[0] == 'g') {
      if (*Cpu != ~0u)
        GCpu = *Cpu;
    } else {
      CAll = *Cpu == ~0u;
      if (!CAll)
        CCpu = *Cpu;
    }
    return {{"OK"}};
  }
  case 'T':
    return {{threadCpu(Args, false) ? "OK" : "E02"}};
  case 'D':
    reset();
    return {{"OK"}, Reply::Then::Detach};
  case 'k':
    return {{}, Reply::Then::Kill};
  case 'v':
    if (P.rfind("vCont", 0) == 0)
      return vCont(P.substr(5));
    if (P.rfind("vKill", 0) == 0)
      return {{"OK"}, Reply::Then::Kill};
    return {{""}}; // vMustReplyEmpty and every other v packet
  case 'q':
    if (P.rfind("qSupported", 0) == 0)
      return {{fmt::format("PacketSize={:x};qXfer:features:read+;qXfer:threads:read+;"
                           "QStartNoAckMode+;swbreak+;hwbreak+;vContSupported+",
                           kMaxPacketBytes)}};
    if (P.rfind("qXfer:", 0) == 0)
      return xfer(P.substr(6));
    if (P == "qfThreadInfo") {
      std::string R = "m";
      for (unsigned I = 0; I < M.numCpus(); ++I)
        R += (I ? "," : "") + threadId(I);
      return {{R}};
    }
    if (P == "qsThreadInfo")
      return {{"l"}};
    if (P == "qC")
      return {{"QC" + threadId(GCpu)}};
    if (P == "qAttached")
      return {{"1"}}; // gdb's quit detaches: the run goes on to its end
    if (P.rfind("qSymbol:", 0) == 0)
      return {{"OK"}};
    if (P.rfind("qThreadExtraInfo,", 0) == 0) {
      auto Id = threadCpu(P.substr(17), false);
      if (!Id)
        return {{"E02"}};
      const Cpu &C = M.cpu(*Id);
      return {{toHex(fmt::format("{}{}", C.NonRoot ? "VMX non-root" : "root",
                                 C.waiting() ? ", waiting" : ""))}};
    }
    if (P.rfind("qRcmd,", 0) == 0) {
      auto Text = fromHex(P.substr(6));
      if (!Text)
        return {{"E01"}};
      return monitor(*Text);
    }
    return {{""}};
  case 'Q':
    if (P == "QStartNoAckMode") {
      NoAck = true;
      return {{"OK"}};
    }
    return {{""}};
  default:
    return {{""}};
  }
}

// --- Replaying gdb's writes (harness/input_log.h) ---

namespace {

Error badLog(const GdbWrite &W, const std::string &What) {
  return Error(ErrorCode::BadInputLog, fmt::format("line {}: {}", W.Line, What));
}

/// One logged write, made as the stub made it.
Error applyGdbWrite(Machine &M, const GdbWrite &W) {
  CpuState S = M.cpu(W.Cpu).S;
  switch (W.K) {
  case GdbWrite::Kind::Register:
    setRegBytes(S, *regByName(W.Reg), W.Bytes); // checkGdbWrites: it is one
    return M.setRegisters(W.Cpu, S);
  case GdbWrite::Kind::AllRegisters:
    (void)setRegsFromG(S, W.Bytes);
    return M.setRegisters(W.Cpu, S);
  case GdbWrite::Kind::Memory:
    break;
  }
  if (Error E = M.writeLinear(W.Cpu, Gla(W.La), W.Bytes.data(), W.Bytes.size()))
    return badLog(W, fmt::format("gdb's memory write of {} bytes at {:#x}: {}",
                                 W.Bytes.size(), W.La, E.Message));
  return Error::success();
}

std::string clocks(const std::vector<uint64_t> &C) {
  std::string S;
  for (uint64_t V : C)
    S += (S.empty() ? "" : ",") + std::to_string(V);
  return S;
}

} // namespace

Error checkGdbWrites(const Machine &M) {
  for (const GdbStopPoint &P : M.replayedGdbStops())
    for (const GdbWrite &W : P.Writes) {
      if (W.Cpu >= M.numCpus())
        return badLog(W, fmt::format("no CPU {} (the machine has {})", W.Cpu, M.numCpus()));
      if (W.K == GdbWrite::Kind::Register) {
        const std::optional<unsigned> N = regByName(W.Reg);
        if (!N)
          return badLog(W, fmt::format("no register \"{}\" in gdb's register set (the "
                                       "stub's target description)",
                                       W.Reg));
        if (W.Bytes.size() != kRegs[*N].Bits / 8)
          return badLog(W, fmt::format("register {} takes {} bytes, the log gives {}", W.Reg,
                                       kRegs[*N].Bits / 8, W.Bytes.size()));
      }
      CpuState Probe{};
      if (W.K == GdbWrite::Kind::AllRegisters && !setRegsFromG(Probe, W.Bytes))
        return badLog(W, "the bytes do not end at a register's end (gdb's G packet)");
    }
  return Error::success();
}

Error replayGdbWrites(Machine &M, std::optional<RunResult> &Ended) {
  if (Error E = checkGdbWrites(M))
    return E;
  const unsigned N = M.numCpus();
  for (const GdbStopPoint &P : M.replayedGdbStops()) {
    auto mismatch = [&](const std::string &How) {
      return Error(ErrorCode::InputLogMismatch,
                   fmt::format("input log: line {}: gdb's stop at {} instructions (clocks {}) "
                               "never came: {}: this run is not the recorded one",
                               P.Line, P.Retired, clocks(P.Cycles), How));
    };
    // To the instruction count, then from stop to stop of the run control until every
    // clock is the logged one (each stop changes nothing: harness/run_control.h).
    for (;;) {
      const GdbStopPoint Here = M.stopPoint();
      bool Past = Here.Retired > P.Retired;
      for (unsigned I = 0; I < N; ++I)
        Past |= Here.Cycles[I] > P.Cycles[I];
      if (Here.Retired == P.Retired && Here.Cycles == P.Cycles)
        break;
      if (Past)
        return mismatch(fmt::format("the run passed it at {} instructions (clocks {})",
                                    Here.Retired, clocks(Here.Cycles)));
      std::vector<StopWhen> Conds;
      if (Here.Retired < P.Retired) {
        Conds.push_back(StopWhen::instructions(P.Retired - Here.Retired));
      } else {
        Conds = {StopWhen::vmExit(), StopWhen::vmEntry(), StopWhen::vmEntryFailure(),
                 StopWhen::instructions(1)};
        for (unsigned I = 0; I < N; ++I)
          if (Here.Cycles[I] < P.Cycles[I])
            Conds.push_back(StopWhen::tsc(P.Cycles[I]).onCpu(I));
      }
      ErrorOr<RunResult> R = M.runUntil(Conds);
      if (!R)
        return R.error();
      if (R->Reason != RunReason::Stopped) {
        Ended = *R;
        return mismatch(fmt::format("the run ended first ({})", R->describe()));
      }
    }
    for (const GdbWrite &W : P.Writes)
      if (Error E = applyGdbWrite(M, W))
        return E;
  }
  return Error::success();
}

} // namespace vmxsim
