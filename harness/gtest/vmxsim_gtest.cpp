#include "harness/gtest/vmxsim_gtest.h"

#include "cpu/vmx/exit_qualification.h"
#include "trace/dump.h"
#include "trace/gt_records.h"
#include "trace/vmx_names.h"
#include "trace/xentrace.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace vmxsim::testing {

namespace {

uint64_t words64(const trace::TraceRecord &R, unsigned Lo) {
  return uint64_t(R.Words[Lo]) | uint64_t(R.Words[Lo + 1]) << 32;
}

std::string reasonText(uint32_t Basic) {
  const char *N = trace::exitReasonName(Basic);
  return fmt::format("{} ({})", N ? N : "reserved", Basic);
}

std::string hex(uint64_t V) { return fmt::format("{:#x}", V); }

} // namespace

// --- GroundTruth ---

GroundTruth::GroundTruth(std::vector<trace::TraceRecord> In)
    : Recs(std::make_shared<std::vector<trace::TraceRecord>>(std::move(In))) {
  const std::vector<trace::TraceRecord> &R = *Recs;
  // Untimed records belong to the last timed one of their CPU; the merge may put another
  // CPU's records between them, so they are matched by CPU.
  std::map<unsigned, size_t> LastExit;    // CPU -> index into Exits
  std::map<unsigned, size_t> OpenHandler; // CPU -> exit awaiting its VM entry
  // With slot watching (GT_SLOT_LAYOUT), GT_VMEXIT_REGS and GT_VMENTRY_REGS are written
  // only when RAX, RCX or RDX changed (trace/events.def, GT_GPR): per CPU, the three as
  // its last such record left them.
  struct RaxRcxRdx {
    uint64_t V[3] = {};
  };
  bool Watched = false;
  std::map<unsigned, RaxRcxRdx> Regs;
  for (size_t I = 0; I < R.size(); ++I) {
    const trace::TraceRecord &Rec = R[I];
    switch (Rec.Event) {
    case XT_EV_GtExit:
    case XT_EV_GtVmExit: {
      trace::GtExitFields X;
      if (!trace::gtExitOf(Rec, X))
        break;
      ExitInfo E;
      E.Cpu = Rec.Cpu;
      E.Tsc = Rec.Tsc;
      E.Reason = X.Reason;
      E.Rip = X.Rip;
      E.Qualification = X.Qual;
      E.InstructionLength = X.Len;
      if (auto It = Regs.find(E.Cpu); Watched && It != Regs.end()) {
        E.HasRegs = true;
        E.Rax = It->second.V[0];
        E.Rcx = It->second.V[1];
        E.Rdx = It->second.V[2];
      }
      E.Source = Recs;
      E.Record = I;
      LastExit[E.Cpu] = Exits.size();
      OpenHandler[E.Cpu] = Exits.size();
      Exits.push_back(E);
      break;
    }
    case XT_EV_GtVmExitEvent:
      if (auto It = LastExit.find(Rec.Cpu); It != LastExit.end()) {
        ExitInfo &E = Exits[It->second];
        E.InterruptionInfo = Rec.Words[0];
        E.InterruptionErrorCode = Rec.Words[1];
        E.IdtVectoringInfo = Rec.Words[2];
        E.IdtVectoringErrorCode = Rec.Words[3];
        E.InstructionInfo = Rec.Words[4];
      }
      break;
    case XT_EV_GtVmExitAddr:
      if (auto It = LastExit.find(Rec.Cpu); It != LastExit.end()) {
        ExitInfo &E = Exits[It->second];
        E.GuestLinearValid = Rec.Words[0] & 1;
        E.GuestPhysicalValid = Rec.Words[0] & 2;
        E.GuestLinearAddress = words64(Rec, 1);
        E.GuestPhysicalAddress = words64(Rec, 3);
      }
      break;
    case XT_EV_GtSlotLayout:
      Watched = true;
      break;
    case XT_EV_GtVmEntryRegs:
      if (Watched)
        Regs[Rec.Cpu] = {{words64(Rec, 0), words64(Rec, 2), words64(Rec, 4)}};
      break;
    case XT_EV_GtVmExitRegs:
      if (Watched)
        Regs[Rec.Cpu] = {{words64(Rec, 0), words64(Rec, 2), words64(Rec, 4)}};
      if (auto It = LastExit.find(Rec.Cpu); It != LastExit.end()) {
        ExitInfo &E = Exits[It->second];
        E.HasRegs = true;
        E.Rax = words64(Rec, 0);
        E.Rcx = words64(Rec, 2);
        E.Rdx = words64(Rec, 4);
      }
      break;
    case XT_EV_GtResume:
    case XT_EV_GtVmEntry: {
      // GT_RESUME: the entry the CPU's open exit implies (trace/events.def).
      const auto Open = OpenHandler.find(Rec.Cpu);
      const uint64_t ResumeRip =
          Open == OpenHandler.end()
              ? 0
              : Exits[Open->second].Rip + Exits[Open->second].InstructionLength;
      trace::GtEntryFields F;
      if (!trace::gtEntryOf(Rec, ResumeRip, F))
        break;
      EntryInfo E;
      E.Cpu = Rec.Cpu;
      E.Tsc = Rec.Tsc;
      E.Rip = F.Rip;
      E.Launch = F.Launch;
      E.InjectedInfo = F.InjInfo;
      E.InjectedErrorCode = F.InjErr;
      E.Source = Recs;
      E.Record = I;
      Entries.push_back(E);
      if (auto It = OpenHandler.find(E.Cpu); It != OpenHandler.end()) {
        ExitInfo &X = Exits[It->second];
        X.HandlerCycles = E.Tsc - X.Tsc;
        OpenHandler.erase(It);
      }
      LastExit.erase(E.Cpu);
      break;
    }
    case XT_EV_GtVmEntryFail: {
      EntryFailureInfo F;
      F.Cpu = Rec.Words[0];
      F.Tsc = Rec.Tsc;
      F.Outcome = VmEntryFailOutcome(Rec.Words[1]);
      F.Number = Rec.Words[2];
      F.CheckId = Rec.Words[3];
      F.Qualification = words64(Rec, 4);
      F.Source = Recs;
      F.Record = I;
      Failures.push_back(F);
      break;
    }
    default:
      break;
    }
  }
}

ErrorOr<GroundTruth> GroundTruth::read(Machine &M) {
  ErrorOr<std::vector<trace::TraceRecord>> R = M.groundTruthRecords();
  if (!R)
    return R.error();
  return GroundTruth(std::move(*R));
}

std::vector<ExitInfo> GroundTruth::exits(unsigned Cpu) const {
  std::vector<ExitInfo> Out;
  for (const ExitInfo &E : Exits)
    if (E.Cpu == Cpu)
      Out.push_back(E);
  return Out;
}

ErrorOr<ExitInfo> lastExit(Machine &M, unsigned Cpu) {
  ExitInfo E;
  auto Get = [&](const char *Field, auto &Out) -> Error {
    ErrorOr<uint64_t> V = M.readVmcs(Cpu, Field);
    if (!V)
      return V.error();
    Out = std::remove_reference_t<decltype(Out)>(*V);
    return Error::success();
  };
  for (auto [Field, Out] : {std::pair{"ExitReason", &E.Reason},
                            std::pair{"VmExitInstructionLength", &E.InstructionLength},
                            std::pair{"VmExitInstructionInformation", &E.InstructionInfo},
                            std::pair{"VmExitInterruptionInformation", &E.InterruptionInfo},
                            std::pair{"VmExitInterruptionErrorCode", &E.InterruptionErrorCode},
                            std::pair{"IdtVectoringInformation", &E.IdtVectoringInfo},
                            std::pair{"IdtVectoringErrorCode", &E.IdtVectoringErrorCode}})
    if (Error Err = Get(Field, *Out))
      return Err;
  if (Error Err = Get("ExitQualification", E.Qualification))
    return Err;
  if (Error Err = Get("GuestRip", E.Rip))
    return Err;
  if (Error Err = Get("GuestLinearAddress", E.GuestLinearAddress))
    return Err;
  if (ErrorOr<uint64_t> Gpa = M.readVmcs(Cpu, "GuestPhysicalAddress"))
    E.GuestPhysicalAddress = *Gpa; // a profile without EPT has no such field
  E.Cpu = Cpu;
  E.Tsc = M.cpu(Cpu).Cycles;
  // The guest's registers are in the processor (VM exit loads only RSP and RIP of the
  // host; the hypervisor has not run yet when runUntil stops at the exit).
  E.HasRegs = true;
  E.Rax = M.cpu(Cpu).S.Gpr[0];
  E.Rcx = M.cpu(Cpu).S.Gpr[1];
  E.Rdx = M.cpu(Cpu).S.Gpr[2];
  return E;
}

std::string describeFields(const ExitInfo &E) {
  auto Line = [](VmcsField F, const std::string &V) {
    return fmt::format("  {}: {}\n", fieldInfo(F).SdmName, V);
  };
  const char *Name = trace::exitReasonName(E.basicReason());
  std::string Out = Line(VmcsField::ExitReason,
                         fmt::format("{:#x} ({})", E.Reason, Name ? Name : "reserved"));
  Out += Line(VmcsField::ExitQualification, hex(E.Qualification));
  Out += Line(VmcsField::GuestRip, hex(E.Rip));
  Out += Line(VmcsField::VmExitInstructionLength, std::to_string(E.InstructionLength));
  if (E.InstructionInfo)
    Out += Line(VmcsField::VmExitInstructionInformation, hex(E.InstructionInfo));
  if (E.InterruptionInfo)
    Out += Line(VmcsField::VmExitInterruptionInformation, hex(E.InterruptionInfo));
  if (E.InterruptionErrorCode)
    Out += Line(VmcsField::VmExitInterruptionErrorCode, hex(E.InterruptionErrorCode));
  if (E.IdtVectoringInfo)
    Out += Line(VmcsField::IdtVectoringInformation, hex(E.IdtVectoringInfo));
  if (E.IdtVectoringErrorCode)
    Out += Line(VmcsField::IdtVectoringErrorCode, hex(E.IdtVectoringErrorCode));
  if (E.GuestLinearValid)
    Out += Line(VmcsField::GuestLinearAddress, hex(E.GuestLinearAddress));
  if (E.GuestPhysicalValid)
    Out += Line(VmcsField::GuestPhysicalAddress, hex(E.GuestPhysicalAddress));
  return Out;
}

std::string recordsAround(const std::vector<trace::TraceRecord> &Recs, size_t Index,
                          size_t Before, size_t After) {
  std::string Out;
  const size_t First = Index > Before ? Index - Before : 0;
  const size_t End = std::min(Recs.size(), Index + After + 1);
  std::map<unsigned, uint64_t> LastTsc; // the dump's deltas, from the first record shown
  for (size_t I = First; I < End; ++I) {
    const trace::TraceRecord &R = Recs[I];
    const uint64_t Delta = LastTsc.count(R.Cpu) ? R.Tsc - LastTsc[R.Cpu] : 0;
    if (R.HasTsc)
      LastTsc[R.Cpu] = R.Tsc;
    Out += fmt::format("{} #{} {}\n", I == Index ? ">" : " ", I, trace::formatRecord(R, Delta));
  }
  return Out;
}

namespace {

/// What a failure says about one exit: where it is, its fields, the records around it.
std::string context(const ExitInfo &E) {
  std::string Out = "\nVMCS fields:\n" + describeFields(E);
  if (E.Source)
    Out += "Ground-truth records:\n" + recordsAround(*E.Source, E.Record);
  return Out;
}

std::string brief(const ExitInfo &E) {
  return fmt::format("VM exit {} on CPU {} at RIP {:#x}", reasonText(E.basicReason()), E.Cpu,
                     E.Rip);
}

} // namespace

void PrintTo(const ExitInfo &E, std::ostream *Os) { *Os << brief(E); }
void PrintTo(const EntryInfo &E, std::ostream *Os) {
  *Os << fmt::format("VM entry on CPU {} to RIP {:#x}", E.Cpu, E.Rip);
}
void PrintTo(const EntryFailureInfo &F, std::ostream *Os) {
  const char *Check = trace::vmEntryCheckName(F.CheckId);
  *Os << fmt::format("VM-entry failure on CPU {}: outcome {}, number {}, check {}", F.Cpu,
                     uint32_t(F.Outcome), F.Number, Check ? Check : "none");
}
void PrintTo(const GroundTruth &T, std::ostream *Os) {
  *Os << fmt::format("the ground truth ({} records, {} VM exits)", T.records().size(),
                     T.exits().size());
}

// --- ExitMatcher ---

ExitMatcher ExitMatcher::with(Check C) const {
  ExitMatcher M = *this;
  if (!C.Show)
    C.Show = hex;
  M.Checks.push_back(std::move(C));
  return M;
}

namespace {
namespace io = exitqual::io;
namespace cra = exitqual::cr_access;
namespace eptv = exitqual::ept_violation;

std::function<uint64_t(const ExitInfo &)> qualField(BitField F) {
  return [F](const ExitInfo &E) { return F.get(E.Qualification); };
}
std::string direction(uint64_t V) { return V ? "IN" : "OUT"; }
std::string yesNo(uint64_t V) { return V ? "yes" : "no"; }
std::string crAccessType(uint64_t V) {
  static const char *const Names[] = {"MOV to CR", "MOV from CR", "CLTS", "LMSW"};
  return V < 4 ? Names[V] : hex(V);
}
std::string ioSize(uint64_t V) { return std::to_string(V + 1) + " bytes"; }
} // namespace

ExitMatcher ExitMatcher::port(uint16_t P) const {
  return with({"port", qualField(io::PortNumber), P, hex(P), hex});
}
ExitMatcher ExitMatcher::in() const {
  return with({"direction", qualField(io::Direction), 1, "IN", direction});
}
ExitMatcher ExitMatcher::out() const {
  return with({"direction", qualField(io::Direction), 0, "OUT", direction});
}
ExitMatcher ExitMatcher::size(unsigned Bytes) const {
  return with({"size", qualField(io::SizeOfAccess), Bytes - 1, ioSize(Bytes - 1), ioSize});
}
ExitMatcher ExitMatcher::string() const {
  return with({"string instruction", qualField(io::StringInstruction), 1, "yes", yesNo});
}
ExitMatcher ExitMatcher::rep() const {
  return with({"REP prefixed", qualField(io::RepPrefixed), 1, "yes", yesNo});
}
ExitMatcher ExitMatcher::cr(unsigned N) const {
  return with({"control register", qualField(cra::CrNumber), N, fmt::format("CR{}", N),
               [](uint64_t V) { return fmt::format("CR{}", V); }});
}
ExitMatcher ExitMatcher::movToCr() const {
  return with({"access type", qualField(cra::AccessType), 0, "MOV to CR", crAccessType});
}
ExitMatcher ExitMatcher::movFromCr() const {
  return with({"access type", qualField(cra::AccessType), 1, "MOV from CR", crAccessType});
}
ExitMatcher ExitMatcher::clts() const {
  return with({"access type", qualField(cra::AccessType), 2, "CLTS", crAccessType});
}
ExitMatcher ExitMatcher::lmsw() const {
  return with({"access type", qualField(cra::AccessType), 3, "LMSW", crAccessType});
}
ExitMatcher ExitMatcher::gpr(unsigned Reg) const {
  return with({"general-purpose register", qualField(cra::GeneralPurposeRegister), Reg,
               std::to_string(Reg), [](uint64_t V) { return std::to_string(V); }});
}
ExitMatcher ExitMatcher::msr(uint32_t Index) const {
  return with({"MSR (ECX)", [](const ExitInfo &E) { return E.Rcx & 0xffffffffu; }, Index,
               hex(Index), hex, true});
}
ExitMatcher ExitMatcher::gpa(uint64_t A) const {
  return with({"guest-physical address",
               [](const ExitInfo &E) {
                 return E.GuestPhysicalValid ? E.GuestPhysicalAddress : ~uint64_t(0);
               },
               A, hex(A), [](uint64_t V) { return V == ~uint64_t(0) ? "none" : hex(V); }});
}
ExitMatcher ExitMatcher::gla(uint64_t A) const {
  return with({"guest-linear address",
               [](const ExitInfo &E) {
                 return E.GuestLinearValid ? E.GuestLinearAddress : ~uint64_t(0);
               },
               A, hex(A), [](uint64_t V) { return V == ~uint64_t(0) ? "none" : hex(V); }});
}
ExitMatcher ExitMatcher::dataRead() const {
  return with({"data read", qualField(eptv::DataRead), 1, "yes", yesNo});
}
ExitMatcher ExitMatcher::dataWrite() const {
  return with({"data write", qualField(eptv::DataWrite), 1, "yes", yesNo});
}
ExitMatcher ExitMatcher::fetch() const {
  return with({"instruction fetch", qualField(eptv::InstructionFetch), 1, "yes", yesNo});
}
ExitMatcher ExitMatcher::vector(uint8_t V) const {
  return with({"vector", [](const ExitInfo &E) { return uint64_t(E.InterruptionInfo & 0xff); },
               V, std::to_string(V), [](uint64_t X) { return std::to_string(X); }});
}
ExitMatcher ExitMatcher::qualification(uint64_t Q) const {
  return with({"exit qualification", [](const ExitInfo &E) { return E.Qualification; }, Q,
               hex(Q), hex});
}
ExitMatcher ExitMatcher::rip(uint64_t R) const {
  return with({"RIP", [](const ExitInfo &E) { return E.Rip; }, R, hex(R), hex});
}
ExitMatcher ExitMatcher::onCpu(unsigned C) const {
  return with({"CPU", [](const ExitInfo &E) { return uint64_t(E.Cpu); }, C, std::to_string(C),
               [](uint64_t V) { return std::to_string(V); }});
}
ExitMatcher ExitMatcher::length(uint32_t Bytes) const {
  return with({"instruction length", [](const ExitInfo &E) { return uint64_t(E.InstructionLength); },
               Bytes, std::to_string(Bytes), [](uint64_t V) { return std::to_string(V); }});
}

bool ExitMatcher::matches(const ExitInfo &E, std::string *Why) const {
  if (E.basicReason() != uint32_t(Reason)) {
    if (Why)
      *Why = fmt::format("exit reason is {}, not {}", reasonText(E.basicReason()),
                         reasonText(uint32_t(Reason)));
    return false;
  }
  for (const Check &C : Checks) {
    if (C.NeedsRegs && !E.HasRegs) {
      if (Why)
        *Why = fmt::format("{} is not known (no registers recorded for this exit)", C.Name);
      return false;
    }
    const uint64_t Got = C.Get(E);
    if (Got != C.Want) {
      if (Why)
        *Why = fmt::format("{} is {}, not {}", C.Name, C.Show(Got), C.Text);
      return false;
    }
  }
  return true;
}

std::string ExitMatcher::describe() const {
  std::string Out = "a VM exit " + reasonText(uint32_t(Reason));
  for (size_t I = 0; I < Checks.size(); ++I)
    Out += fmt::format("{}{} {}", I ? ", " : " with ", Checks[I].Name, Checks[I].Text);
  return Out;
}

namespace {

class ExitMatcherImpl final : public ::testing::MatcherInterface<const ExitInfo &> {
public:
  explicit ExitMatcherImpl(ExitMatcher M) : M(std::move(M)) {}
  bool MatchAndExplain(const ExitInfo &E,
                       ::testing::MatchResultListener *L) const override {
    std::string Why;
    if (M.matches(E, &Why))
      return true;
    *L << Why << context(E);
    return false;
  }
  void DescribeTo(std::ostream *Os) const override { *Os << "is " << M.describe(); }
  void DescribeNegationTo(std::ostream *Os) const override {
    *Os << "is not " << M.describe();
  }

private:
  ExitMatcher M;
};

} // namespace

ExitMatcher::operator ::testing::Matcher<const ExitInfo &>() const {
  return ::testing::MakeMatcher(new ExitMatcherImpl(*this));
}

// --- Exit sequences ---

namespace {

std::string listOf(const std::vector<ExitMatcher> &Want) {
  std::string Out;
  for (size_t I = 0; I < Want.size(); ++I)
    Out += fmt::format("\n  {}: {}", I, Want[I].describe());
  return Out;
}

class SequenceImpl final : public ::testing::MatcherInterface<const std::vector<ExitInfo> &> {
public:
  SequenceImpl(std::vector<ExitMatcher> Want, bool Subsequence)
      : Want(std::move(Want)), Subsequence(Subsequence) {}
  bool MatchAndExplain(const std::vector<ExitInfo> &Got,
                       ::testing::MatchResultListener *L) const override {
    if (!Subsequence) {
      for (size_t I = 0; I < std::min(Got.size(), Want.size()); ++I) {
        std::string Why;
        if (!Want[I].matches(Got[I], &Why)) {
          *L << fmt::format("exit {} differs: {}", I, Why) << context(Got[I]);
          return false;
        }
      }
      if (Got.size() != Want.size()) {
        *L << fmt::format("there are {} exits, not {}", Got.size(), Want.size());
        if (Got.size() > Want.size())
          *L << fmt::format("; the first extra one is {}", brief(Got[Want.size()]))
             << context(Got[Want.size()]);
        return false;
      }
      return true;
    }
    size_t Next = 0;
    for (size_t I = 0; I < Got.size() && Next < Want.size(); ++I)
      if (Want[Next].matches(Got[I], nullptr))
        ++Next;
    if (Next == Want.size())
      return true;
    *L << fmt::format("found the first {} of {} in order; no exit after them is {}", Next,
                      Want.size(), Want[Next].describe());
    return false;
  }
  void DescribeTo(std::ostream *Os) const override {
    *Os << (Subsequence ? "contains these VM exits in order:" : "are exactly these VM exits:")
        << listOf(Want);
  }
  void DescribeNegationTo(std::ostream *Os) const override {
    *Os << (Subsequence ? "does not contain these VM exits in order:"
                        : "are not exactly these VM exits:")
        << listOf(Want);
  }

private:
  std::vector<ExitMatcher> Want;
  bool Subsequence;
};

class CountsImpl final : public ::testing::MatcherInterface<const std::vector<ExitInfo> &> {
public:
  explicit CountsImpl(std::vector<std::pair<ExitReason, uint64_t>> Want)
      : Want(std::move(Want)) {}
  bool MatchAndExplain(const std::vector<ExitInfo> &Got,
                       ::testing::MatchResultListener *L) const override {
    bool Ok = true;
    std::string Why;
    for (const auto &[R, N] : Want) {
      const uint64_t Have = uint64_t(std::count_if(Got.begin(), Got.end(), [R](const ExitInfo &E) {
        return E.basicReason() == uint32_t(R);
      }));
      if (Have != N) {
        Why += fmt::format("{}{}: {}, not {}", Why.empty() ? "" : "; ",
                           reasonText(uint32_t(R)), Have, N);
        Ok = false;
      }
    }
    if (!Ok)
      *L << Why;
    return Ok;
  }
  void DescribeTo(std::ostream *Os) const override {
    *Os << "has";
    for (size_t I = 0; I < Want.size(); ++I)
      *Os << fmt::format("{} {} {} exits", I ? "," : "", Want[I].second,
                         reasonText(uint32_t(Want[I].first)));
  }

private:
  std::vector<std::pair<ExitReason, uint64_t>> Want;
};

} // namespace

::testing::Matcher<const std::vector<ExitInfo> &> ExitsInOrder(std::vector<ExitMatcher> Want) {
  return ::testing::MakeMatcher(new SequenceImpl(std::move(Want), false));
}
::testing::Matcher<const std::vector<ExitInfo> &>
ContainsExitsInOrder(std::vector<ExitMatcher> Want) {
  return ::testing::MakeMatcher(new SequenceImpl(std::move(Want), true));
}
::testing::Matcher<const std::vector<ExitInfo> &>
ExitCountsAre(std::vector<std::pair<ExitReason, uint64_t>> Want) {
  return ::testing::MakeMatcher(new CountsImpl(std::move(Want)));
}

// --- VM-entry failures and VM-instruction errors ---

namespace {

std::string errorText(uint32_t N) {
  return fmt::format("{} ({})", N, N ? vmInstructionErrorText(N) : "none");
}

std::string checkText(uint32_t Id) {
  const char *N = trace::vmEntryCheckName(Id);
  return N ? N : "no check";
}

std::string failureContext(const EntryFailureInfo &F) {
  return F.Source ? "\nGround-truth records:\n" + recordsAround(*F.Source, F.Record) : "";
}

class VmFailImpl final : public ::testing::MatcherInterface<const EntryFailureInfo &> {
public:
  explicit VmFailImpl(uint32_t Want) : Want(Want) {}
  bool MatchAndExplain(const EntryFailureInfo &F,
                       ::testing::MatchResultListener *L) const override {
    if (F.Outcome != VmEntryFailOutcome::VmFailValid) {
      *L << fmt::format("it failed with a VM exit (basic reason {}), not VMfailValid",
                        F.Number)
         << failureContext(F);
      return false;
    }
    if (F.Number != Want) {
      *L << "its VM-instruction error is " << errorText(F.Number) << failureContext(F);
      return false;
    }
    return true;
  }
  void DescribeTo(std::ostream *Os) const override {
    *Os << "failed with VMfailValid, VM-instruction error " << errorText(Want);
  }

private:
  uint32_t Want;
};

class CheckImpl final : public ::testing::MatcherInterface<const EntryFailureInfo &> {
public:
  explicit CheckImpl(uint32_t Want) : Want(Want) {}
  bool MatchAndExplain(const EntryFailureInfo &F,
                       ::testing::MatchResultListener *L) const override {
    if (F.CheckId == Want)
      return true;
    *L << "the failing check is " << checkText(F.CheckId) << failureContext(F);
    return false;
  }
  void DescribeTo(std::ostream *Os) const override {
    *Os << "failed VM-entry check " << checkText(Want);
  }

private:
  uint32_t Want;
};

class MachineErrorImpl final : public ::testing::MatcherInterface<const Machine &> {
public:
  MachineErrorImpl(unsigned Cpu, uint32_t Want) : Cpu(Cpu), Want(Want) {}
  bool MatchAndExplain(const Machine &M, ::testing::MatchResultListener *L) const override {
    ErrorOr<uint64_t> V = M.readVmcs(Cpu, "VmInstructionError");
    if (!V) {
      *L << V.error().str();
      return false;
    }
    if (*V == Want)
      return true;
    *L << fmt::format("CPU {}'s current VMCS has {}: {}", Cpu,
                      fieldInfo(VmcsField::VmInstructionError).SdmName, errorText(uint32_t(*V)));
    return false;
  }
  void DescribeTo(std::ostream *Os) const override {
    *Os << fmt::format("has VM-instruction error {} on CPU {}", errorText(Want), Cpu);
  }

private:
  unsigned Cpu;
  uint32_t Want;
};

class HandlerImpl final : public ::testing::MatcherInterface<const GroundTruth &> {
public:
  HandlerImpl(ExitReason R, uint64_t Max) : Reason(R), Max(Max) {}
  bool MatchAndExplain(const GroundTruth &T, ::testing::MatchResultListener *L) const override {
    const ExitInfo *Worst = nullptr;
    uint64_t Seen = 0;
    for (const ExitInfo &E : T.exits())
      if (E.basicReason() == uint32_t(Reason) && E.HandlerCycles) {
        ++Seen;
        if (!Worst || *E.HandlerCycles > *Worst->HandlerCycles)
          Worst = &E;
      }
    if (!Worst) {
      *L << "there is no " << reasonText(uint32_t(Reason))
         << " exit that a VM entry followed";
      return false;
    }
    if (*Worst->HandlerCycles <= Max)
      return true;
    *L << fmt::format("the slowest of {} {} exits took {} cycles to the next VM entry: {}",
                      Seen, reasonText(uint32_t(Reason)), *Worst->HandlerCycles, brief(*Worst))
       << context(*Worst);
    return false;
  }
  void DescribeTo(std::ostream *Os) const override {
    *Os << fmt::format("has every {} exit handled within {} cycles",
                       reasonText(uint32_t(Reason)), Max);
  }

private:
  ExitReason Reason;
  uint64_t Max;
};

} // namespace

::testing::Matcher<const EntryFailureInfo &> FailedWithVmInstructionError(VmInstructionError E) {
  return ::testing::MakeMatcher(new VmFailImpl(uint32_t(E)));
}
::testing::Matcher<const EntryFailureInfo &> FailedEntryCheck(VmEntryCheckId Id) {
  return ::testing::MakeMatcher(new CheckImpl(uint32_t(Id)));
}
::testing::Matcher<const Machine &> HasVmInstructionError(unsigned Cpu, VmInstructionError E) {
  return ::testing::MakeMatcher(new MachineErrorImpl(Cpu, uint32_t(E)));
}
::testing::Matcher<const GroundTruth &> HandlerCycles::atMost(uint64_t Max) const {
  return ::testing::MakeMatcher(new HandlerImpl(Reason, Max));
}

} // namespace vmxsim::testing

namespace vmxsim {
void PrintTo(const Machine &M, std::ostream *Os) {
  *Os << "a machine with " << M.numCpus() << " CPUs";
}
} // namespace vmxsim
