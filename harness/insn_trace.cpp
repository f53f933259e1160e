#include "harness/insn_trace.h"

#include "cpu/decode_info.h"

#include <capstone/capstone.h>
#include <fmt/format.h>

namespace vmxsim {

namespace {
bool readPhys(const Cpu &C, uint64_t Pa, uint64_t &V, unsigned Size) {
  V = 0;
  return C.Mem.copyOut(Hpa(Pa), &V, Size);
}

// Physical address of La, or false (SDM Vol. 3A, Paging: 32-bit, PAE, 4- and 5-level).
bool translateNoSideEffects(const Cpu &C, uint64_t La, uint64_t &Pa) {
  const CpuState &S = C.S;
  if (!(S.Cr0 & cr0::PG)) {
    Pa = La & 0xffffffffull;
    return true;
  }
  uint64_t E;
  if (!(S.Cr4 & cr4::PAE)) {
    La &= 0xffffffffull;
    if (!readPhys(C, (S.Cr3 & 0xfffff000ull) + ((La >> 22) & 0x3ff) * 4, E, 4) || !(E & 1))
      return false;
    if ((E & 0x80) && (S.Cr4 & cr4::PSE)) {
      Pa = (E & 0xffc00000ull) | (((E >> 13) & 0xff) << 32) | (La & 0x3fffff);
      return true;
    }
    if (!readPhys(C, (E & 0xfffff000ull) + ((La >> 12) & 0x3ff) * 4, E, 4) || !(E & 1))
      return false;
    Pa = (E & 0xfffff000ull) | (La & 0xfff);
    return true;
  }
  const uint64_t AddrMask = 0x000ffffffffff000ull;
  uint64_t Table;
  int Level;
  if (!S.longMode()) {
    La &= 0xffffffffull;
    E = S.Pdpte[(La >> 30) & 3];
    if (!(E & 1))
      return false;
    Table = E & AddrMask;
    Level = 2;
  } else {
    Table = S.Cr3 & AddrMask;
    Level = (S.Cr4 & cr4::LA57) ? 5 : 4;
  }
  for (; Level >= 1; --Level) {
    const unsigned Shift = 12 + 9 * unsigned(Level - 1);
    if (!readPhys(C, Table + ((La >> Shift) & 0x1ff) * 8, E, 8) || !(E & 1))
      return false;
    if (Level == 1 || ((Level == 2 || Level == 3) && (E & 0x80))) {
      const uint64_t PageMask = (1ull << Shift) - 1;
      Pa = (E & AddrMask & ~PageMask) | (La & PageMask);
      return true;
    }
    Table = E & AddrMask;
  }
  return false;
}
} // namespace

unsigned peekLinear(const Cpu &C, uint64_t La, uint8_t *Out, unsigned Len) {
  unsigned Done = 0;
  while (Done < Len) {
    uint64_t Pa;
    if (!translateNoSideEffects(C, La + Done, Pa))
      break;
    unsigned Chunk = unsigned(std::min<uint64_t>(Len - Done, kPageSize - ((La + Done) & 0xfff)));
    if (!C.Mem.copyOut(Hpa(Pa), Out + Done, Chunk))
      break;
    Done += Chunk;
  }
  return Done;
}

InsnTracer::InsnTracer(OutputSink &Out) : Out(Out) {
  const cs_mode Modes[3] = {CS_MODE_16, CS_MODE_32, CS_MODE_64};
  for (unsigned I = 0; I < 3; ++I) {
    csh H;
    HandleOk[I] = cs_open(CS_ARCH_X86, Modes[I], &H) == CS_ERR_OK;
    Handles[I] = H;
  }
}

InsnTracer::~InsnTracer() {
  for (unsigned I = 0; I < 3; ++I)
    if (HandleOk[I]) {
      csh H = Handles[I];
      cs_close(&H);
    }
}

void InsnTracer::write(const std::string &S) {
  for (char Ch : S)
    Out.put(uint8_t(Ch));
}

void InsnTracer::beforeInsn(const Cpu &C, const DecodedInsn &I) {
  Before = C.S;
  SnapshotRetired = C.Retired;
  Mode = C.DecodeMode;
  NumBytes = I.Len > 15 ? 15 : I.Len;
  uint64_t La = C.S.cs().Base + C.S.Rip;
  if (Mode != uint8_t(CodeMode::Long64))
    La &= 0xffffffffull;
  Readable = peekLinear(C, La, Bytes, NumBytes);
}

std::string InsnTracer::describeInsn() const {
  const bool Long = Mode == uint8_t(CodeMode::Long64);
  std::string S = Long ? fmt::format("{:04x}:{:016x} ", Before.cs().Selector, Before.Rip)
                       : fmt::format("{:04x}:{:08x} ", Before.cs().Selector, Before.Rip);
  std::string Hex;
  for (unsigned I = 0; I < NumBytes; ++I)
    Hex += I < Readable ? fmt::format("{:02x} ", Bytes[I]) : std::string("?? ");
  S += fmt::format("{:<31}", Hex);
  const unsigned Idx = Long ? 2 : (Mode == uint8_t(CodeMode::Prot32) ? 1 : 0);
  std::string Text = "(unreadable)";
  if (HandleOk[Idx] && Readable == NumBytes && NumBytes) {
    cs_insn *Insn = nullptr;
    size_t N = cs_disasm(csh(Handles[Idx]), Bytes, NumBytes, Before.Rip, 1, &Insn);
    if (N == 1)
      Text = Insn->op_str[0] ? fmt::format("{} {}", Insn->mnemonic, Insn->op_str)
                             : std::string(Insn->mnemonic);
    else
      Text = "(bad)";
    if (Insn)
      cs_free(Insn, N);
  }
  S += fmt::format("{:<40}", Text);
  return S;
}

void InsnTracer::afterInsn(const Cpu &C, const DecodedInsn &) {
  static const char *const Names[16] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp",
                                        "rsi", "rdi", "r8",  "r9",  "r10", "r11",
                                        "r12", "r13", "r14", "r15"};
  static const char *const SegNames[6] = {"es", "cs", "ss", "ds", "fs", "gs"};
  const CpuState &S = C.S;
  std::string Line = fmt::format("{:>10} ", C.Retired) + describeInsn();
  std::string Delta;
  for (unsigned I = 0; I < 16; ++I)
    if (S.Gpr[I] != Before.Gpr[I])
      Delta += fmt::format(" {}={:#x}", Names[I], S.Gpr[I]);
  if (S.Rflags != Before.Rflags)
    Delta += fmt::format(" rflags={:#x}", S.Rflags);
  for (unsigned I = 0; I < kNumSegRegs; ++I)
    if (S.Seg[I].Selector != Before.Seg[I].Selector)
      Delta += fmt::format(" {}={:#x}", SegNames[I], S.Seg[I].Selector);
  if (S.Cr0 != Before.Cr0)
    Delta += fmt::format(" cr0={:#x}", S.Cr0);
  if (S.Cr2 != Before.Cr2)
    Delta += fmt::format(" cr2={:#x}", S.Cr2);
  if (S.Cr3 != Before.Cr3)
    Delta += fmt::format(" cr3={:#x}", S.Cr3);
  if (S.Cr4 != Before.Cr4)
    Delta += fmt::format(" cr4={:#x}", S.Cr4);
  if (S.Efer != Before.Efer)
    Delta += fmt::format(" efer={:#x}", S.Efer);
  Line += Delta;
  while (!Line.empty() && Line.back() == ' ')
    Line.pop_back();
  write(Line + "\n");
}

void InsnTracer::onException(const Cpu &C, const PendingEvent &E) {
  static const char *const VecNames[22] = {"DE", "DB", "NMI", "BP", "OF", "BR", "UD", "NM",
                                           "DF", "9",  "TS", "NP",  "SS", "GP", "PF", "15",
                                           "MF", "AC", "MC", "XM",  "VE", "CP"};
  std::string Vec = E.Vector < 22 ? VecNames[E.Vector] : fmt::format("{}", E.Vector);
  std::string Line;
  if (C.Retired != SnapshotRetired || C.S.Rip != Before.Rip) {
    // The fault happened while fetching/decoding, before any beforeInsn call.
    Line = fmt::format("{:>10} {:04x}:{:x} (instruction fetch)", C.Retired,
                       C.S.cs().Selector, C.S.Rip);
  } else {
    Line = fmt::format("{:>10} ", C.Retired) + describeInsn();
    while (!Line.empty() && Line.back() == ' ')
      Line.pop_back();
  }
  Line += E.HasErrorCode ? fmt::format(" -> #{}({:#x})", Vec, E.ErrorCode)
                         : fmt::format(" -> #{}", Vec);
  if (E.Vector == vec::PF)
    Line += fmt::format(" cr2={:#x}", E.FaultAddr);
  write(Line + "\n");
}

} // namespace vmxsim
