#include "trace/check_kvm.h"

#include "trace/dump.h"
#include "trace/events.h"
#include "trace/exit_operands.h"
#include "trace/ground_truth.h"
#include "trace/gt_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace vmxsim::trace {

void KvmCycles::add(uint64_t V) {
  Min = Count ? std::min(Min, V) : V;
  Max = Count ? std::max(Max, V) : V;
  Total += V;
  ++Count;
}

namespace {

// Basic exit reasons (SDM Vol. 3C, Appendix C).
constexpr uint32_t kCpuid = 10, kCrAccess = 28, kIo = 30, kRdmsr = 31, kWrmsr = 32,
                   kEptViolation = 48, kEptMisconfig = 49;
constexpr uint32_t kEntryFailure = 0x80000000u;

uint64_t word64(const TraceRecord &R, unsigned I) {
  return uint64_t(R.Words[I]) | uint64_t(R.Words[I + 1]) << 32;
}

/// "NAME fields" of a record (its name from events.def, or its id).
std::string recordText(const TraceRecord &R) {
  const EventInfo *E = findEvent(R.Event);
  const std::string Fields = formatFields(R);
  const std::string Name = E ? E->Name : fmt::format("{:#010x}", R.Event);
  return Fields.empty() ? Name : Name + " " + Fields;
}

/// A ground-truth transition of one CPU with what the untimed records after it add.
struct GtTrans {
  bool IsExit = false, IsFail = false;
  uint64_t Tsc = 0, Offset = 0;
  uint32_t Reason = 0;
  uint64_t Rip = 0, Qual = 0;
  uint32_t Event[5] = {}; ///< intr_info, intr_err, idtv_info, idtv_err, insn_info
  uint32_t AddrValid = 0;
  uint64_t Gpa = 0;
  bool HasRegs = false;
  uint64_t Regs[3] = {}; ///< rax, rcx, rdx
  uint32_t InjInfo = 0;
};

struct GtCpu {
  std::vector<GtTrans> Exits, Entries;
  /// For each exit: the index of the first entry attempt after it (Entries.size(): none).
  std::vector<size_t> EntryAfterExit;
  /// For each entry: the index of the last exit before it + 1 (0: none).
  std::vector<size_t> ExitsBeforeEntry;
  uint64_t ResumeRip = 0; ///< what a GT_RESUME after the last exit stands for
};

class KvmChecker {
public:
  KvmChecker(TraceReader &Kvm, TraceReader &Gt) : Kvm(Kvm), Gt(Gt) {}

  KvmCheckResult run() {
    if (!loadGroundTruth())
      return Res;
    TraceRecord R;
    while (Res.Ok && Kvm.next(R)) {
      ++Res.KvmRecords;
      kvmRecord(R);
    }
    if (Res.Ok && Kvm.failed())
      return readError("KVM trace: " + Kvm.error().str());
    if (!Res.Ok)
      return Res;
    // Everything paired, and the header's counts hold.
    for (auto &[Cpu, G] : Cpus) {
      const State &S = States[Cpu];
      if (S.Exits != G.Exits.size() || S.Entries != G.Entries.size())
        return mismatch(fmt::format("cpu{}: the ground truth has {} VM exits and {} VM-entry "
                                    "attempts, the KVM trace {} kvm_exit and {} kvm_entry "
                                    "(its last record on the CPU at offset {:#x})",
                                    Cpu, G.Exits.size(), G.Entries.size(), S.Exits, S.Entries,
                                    S.LastOffset));
    }
    if (!HaveHeader)
      return readError("the KVM trace has no KVM_FTRACE record (not made by trace import)");
    unsigned CpusSeen = 0;
    for (const auto &[Cpu, S] : States)
      CpusSeen = std::max(CpusSeen, unsigned(Cpu) + 1);
    if (Header[0] != EventRecords || Header[1] != Res.Other || Header[2] != CpusSeen)
      return mismatch(fmt::format("KVM_FTRACE (offset {:#x}) says {} events, {} unknown, {} "
                                  "cpus; the trace holds {} events, {} unknown, on {} cpus",
                                  HeaderOffset, Header[0], Header[1], Header[2], EventRecords,
                                  Res.Other, CpusSeen));
    uint64_t Paired = 0;
    for (const KvmCpuCheck &C : Res.Cpus)
      Paired += C.Exits + C.Entries;
    if (!Paired)
      return mismatch("no VM exit or entry was paired: nothing agreed on");
    return Res;
  }

private:
  struct State {
    size_t Exits = 0, Entries = 0;
    uint32_t Last = 0; ///< the previous record's event on this CPU
    bool InExit = false;
    bool InjSeen = false;    ///< a kvm_inj_virq since the previous kvm_entry
    bool GpExpected = false; ///< a kvm_msr with #GP since the previous kvm_entry
    bool MsrSeen = false;    ///< a kvm_msr since the previous kvm_entry
    uint64_t LastOffset = 0; ///< the previous record's offset on this CPU
  };

  KvmCheckResult &readError(std::string Msg) {
    Res.Ok = false;
    Res.ReadError = true;
    Res.Problem = std::move(Msg);
    return Res;
  }
  KvmCheckResult &mismatch(std::string Msg) {
    if (Res.Ok) {
      Res.Ok = false;
      Res.Problem = std::move(Msg);
    }
    return Res;
  }

  KvmCpuCheck &cpuCheck(uint16_t Cpu) {
    auto It = std::find_if(Res.Cpus.begin(), Res.Cpus.end(),
                           [&](const KvmCpuCheck &C) { return C.Cpu == Cpu; });
    if (It != Res.Cpus.end())
      return *It;
    KvmCpuCheck C;
    C.Cpu = Cpu;
    auto Pos = std::lower_bound(Res.Cpus.begin(), Res.Cpus.end(), Cpu,
                                [](const KvmCpuCheck &A, uint16_t B) { return A.Cpu < B; });
    return *Res.Cpus.insert(Pos, C);
  }

  bool loadGroundTruth() {
    TraceRecord R;
    while (Gt.next(R)) {
      ++Res.GroundTruthRecords;
      if (R.Flavour != TraceFlavour::Modern || eventClass(R.Event) != XT_CLASS_GroundTruth) {
        readError(fmt::format("the ground-truth file holds {} at offset {:#x}: not vmxsim's "
                              "ground truth (the order is: trace check KVM GT)",
                              recordText(R), R.Offset));
        return false;
      }
      GtCpu &G = Cpus[R.Cpu];
      const auto lastExit = [&]() -> GtTrans * {
        return G.Exits.empty() || G.EntryAfterExit.back() != G.Entries.size()
                   ? nullptr
                   : &G.Exits.back();
      };
      switch (R.Event) {
      case XT_EV_GtExit:
      case XT_EV_GtVmExit: {
        GtExitFields X;
        if (!gtExitOf(R, X))
          break;
        GtTrans T;
        T.IsExit = true;
        T.Tsc = R.Tsc;
        T.Offset = R.Offset;
        T.Reason = X.Reason;
        T.Rip = X.Rip;
        T.Qual = X.Qual;
        G.ResumeRip = X.resumeRip();
        G.Exits.push_back(T);
        G.EntryAfterExit.push_back(G.Entries.size());
        break;
      }
      case XT_EV_GtVmExitEvent:
        if (GtTrans *T = lastExit())
          std::copy(R.Words, R.Words + 5, T->Event);
        break;
      case XT_EV_GtVmExitAddr:
        if (GtTrans *T = lastExit()) {
          T->AddrValid = R.Words[0];
          T->Gpa = word64(R, 3);
        }
        break;
      case XT_EV_GtVmExitRegs:
        if (GtTrans *T = lastExit()) {
          T->HasRegs = true;
          for (unsigned I = 0; I < 3; ++I)
            T->Regs[I] = word64(R, 2 * I);
        }
        break;
      case XT_EV_GtResume:
      case XT_EV_GtVmEntry:
      case XT_EV_GtVmEntryFail: {
        GtTrans T;
        T.IsFail = R.Event == XT_EV_GtVmEntryFail;
        T.Tsc = R.Tsc;
        T.Offset = R.Offset;
        // GT_RESUME: the entry its CPU's last exit implies, only right after one.
        if (R.Event == XT_EV_GtResume && !lastExit()) {
          readError(fmt::format("ground truth: cpu{}: {} at offset {:#x} follows no VM exit "
                                "of its CPU (a broken file)",
                                R.Cpu, recordText(R), R.Offset));
          return false;
        }
        GtEntryFields F;
        if (!T.IsFail && gtEntryOf(R, G.ResumeRip, F)) {
          T.Rip = F.Rip;
          T.InjInfo = F.InjInfo;
        }
        G.Entries.push_back(T);
        G.ExitsBeforeEntry.push_back(G.Exits.size());
        break;
      }
      default:
        break;
      }
    }
    if (Gt.failed()) {
      readError("ground truth: " + Gt.error().str());
      return false;
    }
    return true;
  }

  void kvmRecord(const TraceRecord &R) {
    if (R.Flavour != TraceFlavour::Modern) {
      readError("the KVM trace is a xen-3.0 trace, not one made by trace import --ftrace");
      return;
    }
    if (eventClass(R.Event) == XT_CLASS_GroundTruth) {
      readError(fmt::format("the KVM trace holds a ground-truth record ({} at offset {:#x}): "
                            "the order is: trace check KVM GT",
                            recordText(R), R.Offset));
      return;
    }
    State &S = States[R.Cpu];
    GtCpu &G = Cpus[R.Cpu];
    KvmCpuCheck &C = cpuCheck(R.Cpu);
    const uint32_t Prev = S.Last;
    S.Last = R.Event;
    S.LastOffset = R.Offset;
    const auto here = [&] {
      return fmt::format("cpu{}: {} at TSC {} (offset {:#x})", R.Cpu, recordText(R), R.Tsc,
                         R.Offset);
    };

    // The exit the record belongs to (after kvm_exit k and before kvm_entry), or null.
    const GtTrans *Exit = S.InExit && S.Exits ? &G.Exits[S.Exits - 1] : nullptr;
    // The window of an exit's records: [exit, next entry attempt].
    const auto inExitWindow = [&](const char *What) {
      if (!Exit) {
        // Before the CPU's first exit: only the first entry bounds it.
        if (!G.Entries.empty() && S.Entries < G.Entries.size() &&
            R.Tsc > G.Entries[S.Entries].Tsc)
          return mismatch(fmt::format("{}: {} after the VM entry it precedes (TSC {})", here(),
                                      What, G.Entries[S.Entries].Tsc)),
                 false;
        return true;
      }
      const size_t Next = G.EntryAfterExit[S.Exits - 1];
      if (R.Tsc < Exit->Tsc)
        return mismatch(fmt::format("{}: {} before its VM exit (TSC {})", here(), What,
                                    Exit->Tsc)),
               false;
      if (Next < G.Entries.size() && R.Tsc > G.Entries[Next].Tsc)
        return mismatch(fmt::format("{}: {} after the VM entry that ends its exit (TSC {})",
                                    here(), What, G.Entries[Next].Tsc)),
               false;
      return true;
    };
    const auto needExit = [&](std::initializer_list<uint32_t> Reasons, const char *What) {
      if (!Exit || (Exit->Reason & kEntryFailure) ||
          std::find(Reasons.begin(), Reasons.end(), Exit->Reason & 0xffff) == Reasons.end())
        return mismatch(fmt::format("{}: {} after {}", here(), What,
                                    Exit ? fmt::format("a VM exit of reason {}", Exit->Reason)
                                         : std::string("no VM exit"))),
               false;
      return true;
    };
    // The registers of the exit, which a ground truth of an older vmxsim does not have.
    const auto needRegs = [&] {
      if (!Exit->HasRegs)
        return readError(fmt::format("{}: the ground truth has no GT_VMEXIT_REGS after its VM "
                                     "exit at offset {:#x} (an older vmxsim's ground truth: "
                                     "run it again)",
                                     here(), Exit->Offset)),
               false;
      return true;
    };
    const auto same = [&](const char *Field, uint64_t Kvm, uint64_t Truth) {
      if (Kvm != Truth)
        return mismatch(fmt::format("{}: {} {:#x}, the ground truth {:#x}", here(), Field, Kvm,
                                    Truth)),
               false;
      return true;
    };

    switch (R.Event) {
    case XT_EV_KvmFtrace:
      if (HaveHeader || Res.KvmRecords != 1 || R.NumWords != 3) {
        mismatch(here() + ": KVM_FTRACE is not the first record");
        return;
      }
      HaveHeader = true;
      HeaderOffset = R.Offset;
      std::copy(R.Words, R.Words + 3, Header);
      return;
    case XT_EV_VmxExit64: {
      ++EventRecords;
      if (S.Exits >= G.Exits.size()) {
        mismatch(fmt::format("{}: kvm_exit #{} has no VM exit in the ground truth", here(),
                             S.Exits + 1));
        return;
      }
      const GtTrans &T = G.Exits[S.Exits];
      // The entries before this exit must all have been paired (an exit follows an entry).
      const size_t Next = G.EntryAfterExit[S.Exits];
      ++S.Exits;
      S.InExit = true;
      ++C.Exits;
      if (!same("exit reason", R.Words[0], T.Reason) || !same("rip", word64(R, 1), T.Rip))
        return;
      if (R.Tsc < T.Tsc) {
        mismatch(fmt::format("{}: kvm_exit before its VM exit (TSC {})", here(), T.Tsc));
        return;
      }
      if (Next < G.Entries.size() && R.Tsc > G.Entries[Next].Tsc) {
        mismatch(fmt::format("{}: kvm_exit after the next VM entry (TSC {})", here(),
                             G.Entries[Next].Tsc));
        return;
      }
      C.ExitLag.add(R.Tsc - T.Tsc);
      return;
    }
    case XT_EV_KvmExitInfo: {
      if (Prev != XT_EV_VmxExit64 || !Exit) {
        mismatch(here() + ": KVM_EXIT_INFO does not follow a kvm_exit");
        return;
      }
      const bool Failed = Exit->Reason & kEntryFailure;
      const uint32_t Intr = Failed ? 0 : Exit->Event[0];
      const uint32_t Err = !Failed && (Intr & 0x80000800u) == 0x80000800u ? Exit->Event[1] : 0;
      (void)(same("info1 (exit qualification)", word64(R, 1), Exit->Qual) &&
             same("info2 (IDT-vectoring information)", word64(R, 3),
                  Failed ? 0 : Exit->Event[2]) &&
             same("intr_info", R.Words[5], Intr) && same("error_code", R.Words[6], Err));
      return;
    }
    case XT_EV_VmEntry: {
      ++EventRecords;
      if (S.Entries >= G.Entries.size()) {
        mismatch(fmt::format("{}: kvm_entry #{} has no VM entry in the ground truth", here(),
                             S.Entries + 1));
        return;
      }
      const GtTrans &T = G.Entries[S.Entries];
      const size_t Before = G.ExitsBeforeEntry[S.Entries];
      ++S.Entries;
      S.InExit = false;
      ++C.Entries;
      if (Before != S.Exits) {
        mismatch(fmt::format("{}: kvm_entry #{} follows {} kvm_exit, its VM entry {} VM exits",
                             here(), S.Entries, S.Exits, Before));
        return;
      }
      if (R.Tsc > T.Tsc) {
        mismatch(fmt::format("{}: kvm_entry after its VM entry (TSC {})", here(), T.Tsc));
        return;
      }
      if (Before && R.Tsc < G.Exits[Before - 1].Tsc) {
        mismatch(fmt::format("{}: kvm_entry before the VM exit that precedes its entry (TSC {})",
                             here(), G.Exits[Before - 1].Tsc));
        return;
      }
      // SDM Vol. 3C, "VM-Entry Controls for Event Injection": valid (bit 31), type 0
      // (external interrupt) or 4 (software interrupt) in bits 10:8.
      const uint32_t InjType = T.InjInfo >> 8 & 7;
      if (!T.IsFail && (T.InjInfo >> 31) && (InjType == 0 || InjType == 4) && !S.InjSeen) {
        mismatch(fmt::format("{}: its VM entry injects {:#x} (interruption information), with "
                             "no kvm_inj_virq before it",
                             here(), T.InjInfo));
        return;
      }
      // kvm_msr's #GP flag: KVM injects #GP (hardware exception 3, vector 13) at the next
      // entry exactly when the access failed.
      const bool InjectsGp = !T.IsFail && (T.InjInfo & 0x800007ffu) == 0x8000030du;
      if (S.MsrSeen && InjectsGp != S.GpExpected) {
        mismatch(fmt::format("{}: kvm_msr said #GP {}, its VM entry injects {:#x}", here(),
                             S.GpExpected ? 1 : 0, T.InjInfo));
        return;
      }
      S.InjSeen = S.MsrSeen = S.GpExpected = false;
      C.EntryLead.add(T.Tsc - R.Tsc);
      return;
    }
    case XT_EV_KvmEntryInfo: {
      if (Prev != XT_EV_VmEntry || !S.Entries) {
        mismatch(here() + ": KVM_ENTRY_INFO does not follow a kvm_entry");
        return;
      }
      const GtTrans &T = G.Entries[S.Entries - 1];
      if (!T.IsFail)
        same("entry rip", word64(R, 1), T.Rip);
      return;
    }
    case XT_EV_KvmPio: {
      ++EventRecords;
      ++C.Handlers;
      if (!inExitWindow("kvm_pio") || !needExit({kIo}, "kvm_pio"))
        return;
      const uint64_t Q = Exit->Qual;
      const uint32_t Size = ioSize(Q);
      if (!same("pio write", R.Words[0], ioIsIn(Q) ? 0 : 1) ||
          !same("pio port", R.Words[1], ioPort(Q)) || !same("pio size", R.Words[2], Size))
        return;
      if (!ioIsString(Q) && !same("pio count", R.Words[3], 1))
        return;
      if (!ioIsString(Q) && R.Words[0] == 1 && needRegs())
        same("pio out value", R.Words[4], outData(Exit->Regs[0], Size));
      return;
    }
    case XT_EV_KvmMmio: {
      ++EventRecords;
      ++C.Handlers;
      if (!inExitWindow("kvm_mmio") || !needExit({kEptViolation, kEptMisconfig}, "kvm_mmio"))
        return;
      if (R.Words[0] > 2) {
        mismatch(fmt::format("{}: mmio type {} (0, 1 or 2)", here(), R.Words[0]));
        return;
      }
      if (!(Exit->AddrValid & 2)) {
        mismatch(here() + ": its exit has no guest-physical address");
        return;
      }
      if (!same("mmio gpa", word64(R, 2), Exit->Gpa))
        return;
      // SDM Vol. 3C, "Exit Qualification for EPT Violations": bit 0 data read, bit 1 write.
      if ((Exit->Reason & 0xffff) == kEptViolation) {
        const bool Write = R.Words[0] == 2;
        if (!(Exit->Qual >> (Write ? 1 : 0) & 1))
          mismatch(fmt::format("{}: an mmio {} after an EPT violation of qualification {:#x}",
                               here(), Write ? "write" : "read", Exit->Qual));
      }
      return;
    }
    case XT_EV_KvmMsr: {
      ++EventRecords;
      ++C.Handlers;
      if (!inExitWindow("kvm_msr") || !needExit({kRdmsr, kWrmsr}, "kvm_msr"))
        return;
      const bool Write = (Exit->Reason & 0xffff) == kWrmsr;
      if (R.Words[4] > 1) {
        mismatch(fmt::format("{}: #GP flag {} (0 or 1)", here(), R.Words[4]));
        return;
      }
      S.MsrSeen = true;
      S.GpExpected = R.Words[4] == 1;
      if (!same("msr write", R.Words[0], Write ? 1 : 0) || !needRegs() ||
          !same("msr index (ECX)", R.Words[1], msrIndex(Exit->Regs[1])))
        return;
      if (Write)
        same("msr value (EDX:EAX)", word64(R, 2), wrmsrValue(Exit->Regs[0], Exit->Regs[2]));
      return;
    }
    case XT_EV_KvmCr: {
      ++EventRecords;
      ++C.Handlers;
      if (!inExitWindow("kvm_cr") || !needExit({kCrAccess}, "kvm_cr"))
        return;
      // SDM Vol. 3C, "Exit Qualification for Control-Register Accesses": bits 3:0 the CR,
      // 5:4 the access type (0 MOV to CR, 1 MOV from CR, 2 CLTS, 3 LMSW), 11:8 the register.
      const uint64_t Q = Exit->Qual;
      const uint32_t Type = uint32_t(Q >> 4 & 3), Gpr = uint32_t(Q >> 8 & 0xf);
      if (!same("cr write", R.Words[0], Type == 1 ? 0 : 1) ||
          !same("cr number", R.Words[1], Q & 0xf))
        return;
      if (Type == 0 && Gpr < 3 && needRegs())
        same("cr value", word64(R, 2), Exit->Regs[Gpr]);
      return;
    }
    case XT_EV_KvmCpuid: {
      ++EventRecords;
      ++C.Handlers;
      if (!inExitWindow("kvm_cpuid") || !needExit({kCpuid}, "kvm_cpuid") || !needRegs())
        return;
      (void)(same("cpuid function (EAX)", R.Words[0], cpuidLeaf(Exit->Regs[0])) &&
             same("cpuid index (ECX)", R.Words[1], cpuidSubleaf(Exit->Regs[1])));
      return;
    }
    case XT_EV_KvmInjVirq: {
      ++EventRecords;
      ++C.Handlers;
      if (!inExitWindow("kvm_inj_virq"))
        return;
      if (S.Entries >= G.Entries.size()) {
        mismatch(here() + ": an injection no VM entry follows");
        return;
      }
      // SDM Vol. 3C, "VM-Entry Controls for Event Injection": bits 7:0 the vector, 10:8 the
      // type (0 external interrupt, 4 software interrupt), 31 valid.
      const GtTrans &T = G.Entries[S.Entries];
      if (R.Words[0] > 0xff || R.Words[1] > 1) {
        mismatch(fmt::format("{}: vector {:#x} (0..0xff), soft {} (0 or 1)", here(), R.Words[0],
                             R.Words[1]));
        return;
      }
      const uint32_t Want = 0x80000000u | (R.Words[1] ? 4u << 8 : 0) | R.Words[0];
      if (same("injection (valid | type | vector)", Want, T.InjInfo & 0x800007ffu))
        S.InjSeen = true;
      return;
    }
    case XT_EV_KvmOther:
      ++EventRecords;
      ++Res.Other;
      return;
    default:
      mismatch(here() + ": not a record of an imported KVM trace");
      return;
    }
  }

  TraceReader &Kvm, &Gt;
  KvmCheckResult Res;
  std::map<uint16_t, GtCpu> Cpus;
  std::map<uint16_t, State> States;
  bool HaveHeader = false;
  uint32_t Header[3] = {};
  uint64_t HeaderOffset = 0;
  uint64_t EventRecords = 0;
};

/// The fields kvmFreeFields() lists (check_kvm.h): what the ground truth cannot prove.
constexpr KvmFreeField kKvmFreeFields[] = {
    {0, true, 0, 0, KvmFreeWhen::InWindow,
     "a timestamp: ftrace stamps an event when it reserves ring-buffer space, at a point of "
     "its tracing code vmxsim cannot name, so it is bounded by its exit's window and by its "
     "CPU's previous and next events, not proven exactly"},
    {XT_EV_KvmExitInfo, false, 0, 1, KvmFreeWhen::Always,
     "kvm_exit's vcpu: KVM's own vCPU number (vcpu_id), which no VMCS field holds"},
    {XT_EV_KvmEntryInfo, false, 0, 1, KvmFreeWhen::Always,
     "kvm_entry's vcpu: KVM's own vCPU number (vcpu_id), which no VMCS field holds"},
    {XT_EV_KvmEntryInfo, false, 3, 1, KvmFreeWhen::Always,
     "kvm_entry's immediate_exit: KVM's intent to exit right after the entry, its own "
     "bookkeeping"},
    {XT_EV_KvmPio, false, 4, 1, KvmFreeWhen::Read,
     "an IN's value: its result, which KVM or user space supplies and which reaches RAX "
     "only at a later entry; the ground truth has RAX at the exit"},
    {XT_EV_KvmMmio, false, 0, 1, KvmFreeWhen::AfterEptMisconfig,
     "the type after an EPT misconfiguration: its qualification says nothing of the access, "
     "so any of 0 (unsatisfied read), 1 (read), 2 (write) may be right"},
    {XT_EV_KvmMmio, false, 1, 1, KvmFreeWhen::Always,
     "mmio len: the access size KVM's instruction emulator decoded, in no VMCS field"},
    {XT_EV_KvmMmio, false, 4, 2, KvmFreeWhen::Always,
     "mmio val: the data, from the emulator or from user space, in no VMCS field or "
     "recorded register"},
    {XT_EV_KvmMsr, false, 2, 2, KvmFreeWhen::Read,
     "an RDMSR's value: its result, which reaches EDX:EAX only at the next entry"},
    {XT_EV_KvmCr, false, 2, 2, KvmFreeWhen::Read,
     "a MOV from CR's value: its result, which reaches the register only at the next entry"},
    {XT_EV_KvmCr, false, 2, 2, KvmFreeWhen::CrFromOtherGpr,
     "a MOV to CR's value from a register other than RAX, RCX, RDX: the ground truth "
     "records those three only (GT_VMEXIT_REGS)"},
    {XT_EV_KvmCpuid, false, 2, 5, KvmFreeWhen::Always,
     "KVM's CPUID answer (EAX..EDX) and flags: results, from KVM's CPUID table"},
    {XT_EV_KvmInjVirq, false, 2, 1, KvmFreeWhen::Always,
     "kvm_inj_virq's reinjected: whether KVM injects the event again after an IDT-vectoring "
     "exit, its own bookkeeping (the entry's interruption information is the same)"},
    {XT_EV_KvmOther, false, 0, 1, KvmFreeWhen::Always,
     "an unknown event's line number in the ftrace file: not a VM transition"},
};

std::string cyclesText(const KvmCycles &S) {
  if (!S.Count)
    return "-";
  return fmt::format("{}/{}/{}", S.Min, S.Total / S.Count, S.Max);
}

} // namespace

std::span<const KvmFreeField> kvmFreeFields() { return kKvmFreeFields; }

bool isImportedKvmTrace(const std::string &Path) {
  TraceReader R(ReadOrder::File);
  std::string Why;
  if (!R.open(Path, Why))
    return false;
  TraceRecord Rec;
  // File order: the first window's TRACE_CPU_CHANGE header, then its first record.
  for (int I = 0; I < 2 && R.next(Rec); ++I)
    if (Rec.Event != XT_EV_TraceCpuChange)
      return Rec.Event == XT_EV_KvmFtrace;
  return false;
}

KvmCheckResult checkKvmAgainstGroundTruth(TraceReader &Kvm, TraceReader &GroundTruth) {
  return KvmChecker(Kvm, GroundTruth).run();
}

void printKvmCheck(const KvmCheckResult &R, std::FILE *Out) {
  if (R.Ok) {
    uint64_t Exits = 0, Entries = 0, Handlers = 0;
    for (const KvmCpuCheck &C : R.Cpus) {
      Exits += C.Exits;
      Entries += C.Entries;
      Handlers += C.Handlers;
    }
    fmt::print(Out, "match: {} kvm_exit, {} kvm_entry and {} handler events on {} CPU(s) agree "
                    "with the ground truth ({} KVM records, {} ground-truth records, {} "
                    "unknown events not checked)\n",
               Exits, Entries, Handlers, R.Cpus.size(), R.KvmRecords, R.GroundTruthRecords,
               R.Other);
  } else if (!R.ReadError) {
    fmt::print(Out, "mismatch: {}\n", R.Problem);
  }
  for (const KvmCpuCheck &C : R.Cpus)
    fmt::print(Out,
               "cpu{}: {} exits, {} entries, {} handler events checked; cycles from VM exit "
               "to kvm_exit min/mean/max {}; from kvm_entry to VM entry {}\n",
               C.Cpu, C.Exits, C.Entries, C.Handlers, cyclesText(C.ExitLag),
               cyclesText(C.EntryLead));
}

} // namespace vmxsim::trace
