// `trace check` proves every word of a hypervisor's trace (issue 13): the core's own trace
// of a vmx_e2e run, in both flavours, and of the hv image's apicv scenario on 2 CPUs
// (virtualized EOI and APIC-write exits, posted interrupts), is checked against the
// ground truth of the same run
// (which watched the published trace slots: trace/slot_layout.h); then every bit of every
// record is flipped in turn and each mutant must be caught: status 1 naming the record, or
// a read error (status 2). Only bits of the fields trace/check.cpp lists as free
// (freeFields()) may survive. The checks run in memory, so the 54,368 mutants take
// seconds.
#include "harness/machine.h"
#include "tests/support/files.h"
#include "trace/check.h"
#include "trace/reader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::trace;

namespace {

struct Traces {
  std::vector<uint8_t> Hv, Gt;
};

std::vector<uint8_t> take(const std::string &Path) {
  const std::string S = vmxsim::test::readFile(Path);
  std::remove(Path.c_str());
  return std::vector<uint8_t>(S.begin(), S.end());
}

/// The hypervisor trace and ground truth of one run of Image (vmx_e2e.elf, hv.elf) on
/// Cpus CPUs with Append on its command line ("" for the modern flavour,
/// "trace=xen-3.0", "scenario=apicv").
Traces runImage(const std::string &Image, const std::string &Append, unsigned Cpus = 1) {
  const std::string Base = (std::filesystem::temp_directory_path() /
                            ("vmxsim_slotcheck_" + std::to_string(::getpid()) + "_"))
                               .string() +
                           (Append.empty() ? "modern" : Append.substr(Append.find('=') + 1));
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Image;
  Cfg.Append = Append;
  Cfg.NumCpus = Cpus;
  Cfg.Serial = Cfg.Debugcon = OutputSpec::discard();
  Cfg.XentraceFile = Base + ".hv.xt";
  Cfg.GroundTruthFile = Base + ".gt.xt";
  {
    Error Err;
    auto M = Machine::create(Cfg, Err);
    EXPECT_TRUE(M) << Err.str();
    if (M) {
      EXPECT_EQ(M->run().ExitStatus, 1); // the images' success code (isa-debug-exit)
    }
  }
  return {take(Cfg.XentraceFile), take(Cfg.GroundTruthFile)};
}

CheckResult check(const std::vector<uint8_t> &Hv, const std::vector<uint8_t> &Gt) {
  TraceReader H, G;
  H.openMemory(Hv.data(), Hv.size());
  G.openMemory(Gt.data(), Gt.size());
  return checkAgainstGroundTruth(H, G);
}

/// Each record of the file, in file order: [Offset, End) and its event.
struct RecordSpan {
  uint64_t Offset = 0, End = 0;
  uint32_t Event = 0;
  bool Xen30 = false;
};

std::vector<RecordSpan> recordSpans(const std::vector<uint8_t> &Hv) {
  TraceReader R(ReadOrder::File);
  R.openMemory(Hv.data(), Hv.size());
  std::vector<RecordSpan> Out;
  TraceRecord Rec;
  while (R.next(Rec)) {
    if (!Out.empty())
      Out.back().End = Rec.Offset;
    Out.push_back({Rec.Offset, Hv.size(), Rec.Event, Rec.Flavour == TraceFlavour::Xen30});
  }
  EXPECT_FALSE(R.failed());
  return Out;
}

/// True when byte Offset of the file lies in a field freeFields() lists.
bool inFreeField(const std::vector<RecordSpan> &Spans, uint64_t Offset) {
  for (const RecordSpan &S : Spans) {
    if (Offset < S.Offset || Offset >= S.End)
      continue;
    for (const FreeField &F : freeFields())
      if (F.Xen30 == S.Xen30 && (F.Event == 0 || F.Event == S.Event) &&
          Offset >= S.Offset + F.Offset && Offset < S.Offset + F.Offset + F.Bytes)
        return true;
  }
  return false;
}

void expectEveryBitCaught(const Traces &T, const char *Name) {
  ASSERT_GT(T.Hv.size(), 0u);

  const std::vector<RecordSpan> Spans = recordSpans(T.Hv);
  uint64_t Checked = 0, Caught = 0, Free = 0, ReadErrors = 0;
  std::vector<uint8_t> M = T.Hv;
  for (uint64_t Bit = 0; Bit < T.Hv.size() * 8; ++Bit) {
    M[Bit / 8] ^= uint8_t(1u << (Bit % 8));
    const CheckResult R = check(M, T.Gt);
    M[Bit / 8] ^= uint8_t(1u << (Bit % 8));
    if (inFreeField(Spans, Bit / 8)) {
      ++Free;
      continue;
    }
    ++Checked;
    if (R.Ok) {
      ADD_FAILURE() << Name << ": flipping bit " << Bit % 8 << " of byte " << std::hex
                    << "0x" << Bit / 8 << " still matches";
      continue;
    }
    ++Caught;
    ReadErrors += R.ReadError;
    EXPECT_EQ(R.Problem.find('\n'), std::string::npos);
    if (!R.ReadError && !R.WrongKind) {
      EXPECT_NE(R.Problem.find("offset 0x"), std::string::npos)
          << "bit " << Bit << ": " << R.Problem;
    }
  }
  std::printf("%s: %llu bits flipped, %llu in free fields; %llu of %llu checked bits caught "
              "(%.2f%%), %llu of them as broken files\n",
              Name, (unsigned long long)(Checked + Free), (unsigned long long)Free,
              (unsigned long long)Caught, (unsigned long long)Checked,
              Checked ? 100.0 * double(Caught) / double(Checked) : 0.0,
              (unsigned long long)ReadErrors);
  EXPECT_EQ(Caught, Checked);
}

} // namespace

/// vmx_e2e's 40 exits on one CPU, checked before the mutants.
Traces e2eTraces(const std::string &Append) {
  Traces T = runImage("vmx_e2e.elf", Append);
  EXPECT_GT(T.Hv.size(), 500u);
  const CheckResult Good = check(T.Hv, T.Gt);
  EXPECT_TRUE(Good.Ok) << Good.Problem;
  EXPECT_EQ(Good.Cpus.size(), 1u);
  if (Good.Cpus.size() == 1) {
    EXPECT_EQ(Good.Cpus[0].Exits, 40u);
    EXPECT_GE(Good.Cpus[0].HandlerRecords, 39u);
  }
  return T;
}

TEST(SlotCheckMutation, EveryCheckedBitOfTheModernTraceIsCaught) {
  expectEveryBitCaught(e2eTraces(""), "modern");
}

TEST(SlotCheckMutation, EveryCheckedBitOfTheXen30TraceIsCaught) {
  expectEveryBitCaught(e2eTraces("trace=xen-3.0"), "xen-3.0");
}

TEST(SlotCheckMutation, EveryCheckedBitOfTheApicvTraceIsCaught) {
  const Traces T = runImage("hv.elf", "scenario=apicv", 2);
  const CheckResult Good = check(T.Hv, T.Gt);
  ASSERT_TRUE(Good.Ok) << Good.Problem;
  ASSERT_EQ(Good.Cpus.size(), 2u);
  for (const CpuCheck &C : Good.Cpus)
    EXPECT_EQ(C.Exits, 4u) << "cpu" << C.Cpu; // 56, 18 (post), 45, 18 (end)
  EXPECT_EQ(T.Hv.size(), 408u);
  expectEveryBitCaught(T, "apicv");
}
