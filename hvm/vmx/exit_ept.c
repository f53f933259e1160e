/* EPT violations and misconfigurations (SDM Vol. 3C, "EPT Violations" and "EPT
 * Misconfigurations"). A violation in the lazily mapped region (vmx/ept.h) maps the page
 * and re-executes the instruction; one on the emulated MMIO page is emulated: the MOV
 * is decoded (vmx/movdecode.h), checked against the qualification's read/write bits,
 * carried out on the vCPU's device registers, and skipped. Anywhere else it stops the
 * image, as does any misconfiguration (our EPT has none, so one is a bug).
 */
#include "vmx/ept.h"
#include "vmx/exit.h"
#include "vmx/insn.h"
#include "vmx/movdecode.h"

/* SDM Vol. 3C, Table "Exit Qualification for EPT Violations": bit 0 data read, bit 1
   data write. */
#define EPT_QUAL_WRITE (1ull << 1)

static uint64_t mmioRead(struct PerCpu *Cpu, uint32_t Offset) {
  switch (Offset) {
  case EPT_MMIO_ID: return EPT_MMIO_ID_VALUE;
  case EPT_MMIO_SCRATCH: return Cpu->MmioScratch;
  case EPT_MMIO_COUNTER: return Cpu->MmioCounter++;
  default: return ~0ull; /* nothing there: all ones, as an unclaimed bus read */
  }
}

static void mmioWrite(struct PerCpu *Cpu, uint32_t Offset, uint64_t Value) {
  if (Offset == EPT_MMIO_SCRATCH)
    Cpu->MmioScratch = Value;
}

/* The guest shares the host's identity map (vmx.h, GuestSetup; with paging off in real
   mode, linear = guest-physical = host-physical through the identity EPT), so CS base +
   RIP is an address the hypervisor can read the instruction from. */
static enum ExitAction emulateMmio(struct PerCpu *Cpu, struct GuestRegs *Regs, uint64_t Gpa) {
  struct MovInsn M;
  const uint8_t *Code =
      (const uint8_t *)(uintptr_t)(vmread(Vmcs_GuestCsBase) + Cpu->Exit.GuestRip);
  bool Write = (Cpu->Exit.Qualification & EPT_QUAL_WRITE) != 0;
  TRACE_VMEXIT(3, P2M_MMIO_DM);
  if (!decodeMov(Code, &M) || M.Store != Write) {
    exitNote(Cpu, "MMIO access at guest-physical 0x%lx by an instruction not emulated "
                  "(bytes %02x %02x %02x)", Gpa, Code[0], Code[1], Code[2]);
    return Action_Stop;
  }
  uint64_t Mask = M.Size == 8 ? ~0ull : (1ull << (8 * M.Size)) - 1;
  uint32_t Offset = (uint32_t)(Gpa - EPT_MMIO_BASE);
  uint64_t Value;
  if (M.Store) {
    Value = (M.HasImm ? M.Imm : readGuestGpr(Regs, M.Reg)) & Mask;
    mmioWrite(Cpu, Offset, Value);
  } else {
    Value = mmioRead(Cpu, Offset) & Mask;
    /* SDM Vol. 1, "General-Purpose Registers in 64-Bit Mode": a 32-bit result
       zero-extends, a 16-bit one leaves bits 63:16 alone. */
    uint64_t Old = readGuestGpr(Regs, M.Reg);
    writeGuestGpr(Regs, M.Reg, M.Size == 2 ? (Old & ~Mask) | Value : Value);
  }
  TRACE_VMEXIT(2, Value);
  ++Cpu->MmioAccesses;
  Cpu->Exit.InstructionLength = M.Length;
  return Action_Advance;
}

enum ExitAction handleEptViolation(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  /* Slots: the guest-physical address; the host frame mapped (lazy region) or the data
     read or written (MMIO page); the p2m type (P2M_RAM_RW or P2M_MMIO_DM); the
     qualification (read/write/fetch, the entry's permissions, GLA valid). */
  uint64_t Gpa = vmread(Vmcs_GuestPhysicalAddress);
  TRACE_VMEXIT(1, Gpa);
  TRACE_VMEXIT(4, Cpu->Exit.Qualification);
  if (Gpa >= EPT_MMIO_BASE && Gpa < EPT_MMIO_BASE + 4096)
    return emulateMmio(Cpu, Regs, Gpa);
  uint64_t Frame;
  if (!eptMapLazy(Gpa, &Frame)) {
    exitNote(Cpu, "EPT violation at guest-physical 0x%lx outside the lazy region, "
                  "qualification 0x%lx", Gpa, Cpu->Exit.Qualification);
    return Action_Stop;
  }
  TRACE_VMEXIT(2, Frame);
  ++Cpu->LazyMaps;
  /* A fault-like exit: RIP still points at the access, which now succeeds. */
  return Action_Resume;
}

enum ExitAction handleEptMisconfig(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  uint64_t Gpa = vmread(Vmcs_GuestPhysicalAddress);
  TRACE_VMEXIT(1, Gpa);
  exitNote(Cpu, "EPT misconfiguration at guest-physical 0x%lx", Gpa);
  return Action_Stop;
}
