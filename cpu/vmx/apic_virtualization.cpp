// APIC virtualization (SDM Vol. 3C, "APIC Virtualization and Virtual Interrupts"); see
// apic_virtualization.h for what is modelled and where each hook sits.
#include "cpu/vmx/apic_virtualization.h"

#include "cpu/cpu.h"
#include "cpu/decode.h"
#include "cpu/exceptions.h"
#include "cpu/vmx/exit_qualification.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmx_events.h"
#include "cpu/vmx/vmx_state.h"

#include <cstring>

namespace vmxsim::apicv {

namespace {

using F = VmcsField;

// Virtual-APIC page offsets (SDM Vol. 3C, "Virtualized APIC Registers").
constexpr uint32_t kVtpr = 0x80, kVppr = 0xa0, kVeoi = 0xb0, kVisr = 0x100, kVirr = 0x200,
                   kVicrLo = 0x300, kVicrHi = 0x310;

bool ctl(const Cpu &C, VmxControl Ctl) { return controlSet(C.Vmx->Vmcs, Ctl); }

uint64_t virtualApic(const Cpu &C) { return C.Vmx->Vmcs.get(F::VirtualApicAddress); }

uint32_t readVirtualApic32(const Cpu &C, uint32_t Offset) {
  return uint32_t(C.Mem.read(Hpa(virtualApic(C) + Offset), 4));
}

/// The length of the instruction at CS:RIP, through the fetch TLB only (no walk, so no
/// fault and no VM exit can come of it): the instruction that made the access was
/// fetched through it a moment ago. 0 when its bytes are not mapped there.
uint32_t lengthOfInstructionAtRip(const Cpu &C) {
  const bool Is64 = C.DecodeMode == uint8_t(CodeMode::Long64);
  const uint64_t La = Is64 ? C.S.Rip : uint32_t(C.S.cs().Base + C.S.Rip);
  uint8_t Buf[16];
  unsigned Got = 0;
  Hpa Pa;
  const unsigned InPage = unsigned(kPageSize - (La & 0xfff));
  const uint8_t *H = C.Mmu.fetchHost(Gla(La), Pa);
  if (!H)
    return 0;
  Got = InPage < 15 ? InPage : 15;
  std::memcpy(Buf, H, Got);
  if (Got < 15) {
    const uint64_t Next = Is64 ? La + Got : uint32_t(La + Got);
    if (const uint8_t *H2 = C.Mmu.fetchHost(Gla(Next), Pa)) {
      std::memcpy(Buf + Got, H2, 15 - Got);
      Got = 15;
    }
  }
  DecodedInsn I;
  if (!decodeOne(Buf, Got, CodeMode(C.DecodeMode), I))
    return 0;
  return I.Len;
}

/// The APIC-access VM exit (exit reason 44; SDM Vol. 3C, "APIC-Access VM Exits"):
/// fault-like, so guest RIP stays at the instruction; during event delivery it reports
/// IDT-vectoring information (SDM Vol. 3C, "Information for VM Exits That Occur During
/// Event Delivery") and uses access type 3 or 10. A linear access during instruction
/// execution records the instruction's length.
Status apicAccessExit(Cpu &C, uint32_t PageOffset, exitqual::ApicAccessType Type) {
  using namespace exitqual::apic_access;
  VmxEventState &E = C.Vmx->Events;
  const bool Delivering = E.DeliveringInfo != 0;
  if (Delivering)
    Type = Type == exitqual::ApicAccessType::GuestPhysicalInstruction
               ? exitqual::ApicAccessType::GuestPhysicalEventDelivery
               : exitqual::ApicAccessType::LinearEventDelivery;
  VmExitInfo Info;
  Info.Reason = ExitReason::ApicAccess;
  Info.Qualification = AccessType.set(Offset.set(0, PageOffset & 0xfff), uint64_t(Type));
  if (!Delivering && (Type == exitqual::ApicAccessType::LinearRead ||
                      Type == exitqual::ApicAccessType::LinearWrite))
    Info.InstructionLength = lengthOfInstructionAtRip(C);
  vmxFillIdtVectoring(C, Info);
  E.DeliveringInfo = E.DeliveringErrorCode = E.DeliveringInsnLength = 0;
  E.InjectingEvent = E.MtfPending = E.ApicWritePending = false;
  E.IretNmiMark = 0;
  return vmExit(C, Info);
}

/// The conditions that make every data access to the page exit, whatever its offset (SDM
/// Vol. 3C, "Virtualizing Reads from the APIC-Access Page" and "Determining Whether a
/// Write Access is Virtualized"): "use TPR shadow" 0, more than 32 bits, part of an
/// operation that already virtualized a write, or not entirely within the low 4 bytes
/// of a naturally aligned 16-byte region.
bool alwaysExits(const Cpu &C, uint32_t Offset, unsigned SizeBytes) {
  if (!ctl(C, VmxControl::UseTprShadow) || SizeBytes > 4 || C.Vmx->Events.ApicWritePending)
    return true;
  const uint32_t Last = Offset + SizeBytes - 1;
  return (Offset & 0xc) || (Last & 0xc) || (Offset >> 4) != (Last >> 4);
}

/// The 16-byte-aligned register offsets a read may reach with "APIC-register
/// virtualization" (SDM Vol. 3C, "Virtualizing Reads from the APIC-Access Page"): ID,
/// version, TPR, EOI, LDR, DFR, SVR, ISR, TMR, IRR, ESR, ICR low and high, the LVT,
/// initial count, divide configuration.
bool readableRegister(uint32_t Reg) {
  switch (Reg) {
  case 0x020: case 0x030: case 0x080: case 0x0b0: case 0x0d0: case 0x0e0: case 0x0f0:
  case 0x280: case 0x300: case 0x310: case 0x380: case 0x3e0:
    return true;
  default:
    return (Reg >= 0x100 && Reg <= 0x270) || (Reg >= 0x320 && Reg <= 0x370);
  }
}

/// Those a write may reach ("Determining Whether a Write Access is Virtualized"): ID,
/// TPR, EOI, LDR, DFR, SVR, ESR, ICR low and high, the LVT, initial count, divide
/// configuration.
bool writableRegister(uint32_t Reg) {
  switch (Reg) {
  case 0x020: case 0x080: case 0x0b0: case 0x0d0: case 0x0e0: case 0x0f0: case 0x280:
  case 0x300: case 0x310: case 0x380: case 0x3e0:
    return true;
  default:
    return Reg >= 0x320 && Reg <= 0x370;
  }
}

// --- Virtual-interrupt delivery (SDM Vol. 3C, "Virtual-Interrupt Delivery" and
// "Virtualized APIC Registers"): RVI and SVI live in the guest interrupt-status field
// of the current VMCS (bits 7:0 and 15:8), which VM entry loads and VM exit saves; VIRR
// and VISR are 256-bit values on the virtual-APIC page, bit x at bit (x & 1FH) of the
// doubleword at 200H/100H | ((x & E0H) >> 1).

uint8_t rvi(const Cpu &C) { return uint8_t(C.Vmx->Vmcs.get(F::GuestInterruptStatus)); }
uint8_t svi(const Cpu &C) { return uint8_t(C.Vmx->Vmcs.get(F::GuestInterruptStatus) >> 8); }
void setInterruptStatus(Cpu &C, uint8_t Rvi, uint8_t Svi) {
  C.Vmx->Vmcs.set(F::GuestInterruptStatus, uint64_t(Rvi) | (uint64_t(Svi) << 8));
}

Hpa vectorWord(const Cpu &C, uint32_t Base, uint8_t Vector) {
  return Hpa(virtualApic(C) + Base + ((Vector & 0xe0u) >> 1));
}
void setVectorBit(Cpu &C, uint32_t Base, uint8_t Vector, bool On) {
  const Hpa A = vectorWord(C, Base, Vector);
  const uint32_t W = uint32_t(C.Mem.read(A, 4));
  const uint32_t Bit = 1u << (Vector & 31);
  C.Mem.write(A, 4, On ? W | Bit : W & ~Bit, StoreAgent::Processor);
}
/// The highest vector set in VIRR or VISR, -1 when none is.
int highestVector(const Cpu &C, uint32_t Base) {
  for (int Word = 7; Word >= 0; --Word)
    if (uint32_t W = uint32_t(C.Mem.read(Hpa(virtualApic(C) + Base + 16 * Word), 4)))
      return Word * 32 + 31 - __builtin_clz(W);
  return -1;
}

/// PPR virtualization (SDM Vol. 3C, "PPR Virtualization").
void pprVirtualization(Cpu &C) {
  const uint32_t Vtpr = readVirtualApic32(C, kVtpr);
  const uint8_t Svi = svi(C);
  const uint32_t Vppr = ((Vtpr >> 4) & 0xf) >= uint32_t(Svi >> 4) ? Vtpr & 0xff : Svi & 0xf0u;
  C.Mem.write(Hpa(virtualApic(C) + kVppr), 4, Vppr, StoreAgent::Processor);
}

/// Evaluation of pending virtual interrupts (SDM Vol. 3C, "Evaluation of Pending Virtual
/// Interrupts"): recognized when "interrupt-window exiting" is 0 and RVI[7:4] >
/// VPPR[7:4]. A recognized interrupt makes the event window due.
void evaluatePendingVirtualInterrupts(Cpu &C) {
  const bool Recognized = !ctl(C, VmxControl::InterruptWindowExiting) &&
                          (rvi(C) >> 4) > ((readVirtualApic32(C, kVppr) >> 4) & 0xf);
  C.Vmx->Events.VirtualInterruptRecognized = Recognized;
  if (Recognized)
    C.breakBlock();
}

/// TPR virtualization (SDM Vol. 3C, "TPR Virtualization"), after the operation that
/// wrote VTPR completed: with "virtual-interrupt delivery" 0, a VTPR[7:4] below TPR
/// threshold[3:0] causes the trap-like TPR-below-threshold VM exit (guest RIP is the next
/// instruction); with it 1, PPR virtualization and the evaluation of pending virtual
/// interrupts.
Status tprVirtualization(Cpu &C) {
  if (ctl(C, VmxControl::VirtualInterruptDelivery)) {
    pprVirtualization(C);
    evaluatePendingVirtualInterrupts(C);
    return Status::Ok;
  }
  if (((readVirtualApic32(C, kVtpr) >> 4) & 0xf) <
      (C.Vmx->Vmcs.get(F::TprThreshold) & 0xf)) {
    VmExitInfo E;
    E.Reason = ExitReason::TprBelowThreshold;
    C.Vmx->Events.MtfPending = false;
    return vmExit(C, E);
  }
  return Status::Ok;
}

/// EOI virtualization (SDM Vol. 3C, "EOI Virtualization"): the in-service vector SVI
/// leaves VISR, SVI becomes the next one, PPR virtualization; then the EOI-induced VM
/// exit (reason 45, trap-like, the vector as qualification) when the vector's bit in the
/// EOI-exit bitmap is 1, else the evaluation of pending virtual interrupts.
Status eoiVirtualization(Cpu &C) {
  const uint8_t Vector = svi(C);
  setVectorBit(C, kVisr, Vector, false);
  const int Next = highestVector(C, kVisr);
  setInterruptStatus(C, rvi(C), Next < 0 ? 0 : uint8_t(Next));
  pprVirtualization(C);
  static constexpr F Bitmaps[] = {F::EoiExitBitmap0, F::EoiExitBitmap1, F::EoiExitBitmap2,
                                  F::EoiExitBitmap3};
  if ((C.Vmx->Vmcs.get(Bitmaps[Vector >> 6]) >> (Vector & 63)) & 1) {
    VmExitInfo E;
    E.Reason = ExitReason::VirtualizedEoi;
    E.Qualification = Vector;
    C.Vmx->Events.MtfPending = false;
    return vmExit(C, E);
  }
  evaluatePendingVirtualInterrupts(C);
  return Status::Ok;
}

/// Self-IPI virtualization (SDM Vol. 3C, "Self-IPI Virtualization").
void selfIpiVirtualization(Cpu &C, uint8_t Vector) {
  setVectorBit(C, kVirr, Vector, true);
  setInterruptStatus(C, rvi(C) > Vector ? rvi(C) : Vector, svi(C));
  evaluatePendingVirtualInterrupts(C);
}

/// Whether an ICR-low value written through the APIC-access page is a self-IPI the
/// processor virtualizes (SDM Vol. 3C, "APIC-Write Emulation"): reserved bits 31:20,
/// 17:16 and 13 and the delivery status (bit 12) 0, destination shorthand self (01B),
/// edge trigger, fixed delivery mode, vector at least 16.
bool virtualizableSelfIpi(uint32_t IcrLo) {
  return !(IcrLo & 0xfff33000u) && ((IcrLo >> 18) & 3) == 1 && !(IcrLo & (1u << 15)) &&
         ((IcrLo >> 8) & 7) == 0 && (IcrLo & 0xff) >= 16;
}

} // namespace

bool onApicAccessPage(const Cpu &C, Hpa Pa) {
  return controlSet(C.Vmx->Vmcs, VmxControl::VirtualizeApicAccesses) &&
         (Pa.value() & kPageMask) == (C.Vmx->Vmcs.get(F::ApicAccessAddress) & kPageMask);
}

Status linearRead(Cpu &C, Hpa Pa, unsigned SizeBytes, uint8_t *Out) {
  const uint32_t Offset = uint32_t(Pa.pageOffset());
  bool Virtualized = !alwaysExits(C, Offset, SizeBytes);
  if (Virtualized)
    Virtualized = ctl(C, VmxControl::ApicRegisterVirtualization)
                      ? readableRegister(Offset & ~0xfu)
                      : Offset == kVtpr;
  if (!Virtualized)
    return apicAccessExit(C, Offset, exitqual::ApicAccessType::LinearRead);
  // "returns data from the corresponding page offset on the virtual-APIC page".
  for (unsigned K = 0; K < SizeBytes; ++K)
    Out[K] = uint8_t(C.Mem.read(Hpa(virtualApic(C) + Offset + K), 1));
  return Status::Ok;
}

Status linearWrite(Cpu &C, Hpa Pa, unsigned SizeBytes, const uint8_t *In) {
  const uint32_t Offset = uint32_t(Pa.pageOffset());
  bool Virtualized = !alwaysExits(C, Offset, SizeBytes);
  if (Virtualized) {
    if (ctl(C, VmxControl::ApicRegisterVirtualization))
      Virtualized = writableRegister(Offset & ~0xfu);
    else if (ctl(C, VmxControl::VirtualInterruptDelivery))
      Virtualized = Offset == kVtpr || Offset == kVeoi || Offset == kVicrLo;
    else
      Virtualized = Offset == kVtpr;
  }
  if (!Virtualized)
    return apicAccessExit(C, Offset, exitqual::ApicAccessType::LinearWrite);
  // "writing data to the corresponding page offset on the virtual-APIC page"; APIC-write
  // emulation follows the operation (pendingApicWrite).
  for (unsigned K = 0; K < SizeBytes; ++K)
    C.Mem.write(Hpa(virtualApic(C) + Offset + K), 1, In[K], StoreAgent::Processor);
  VmxEventState &E = C.Vmx->Events;
  E.ApicWritePending = true;
  E.ApicWriteOffset = uint16_t(Offset);
  C.breakBlock();
  return Status::Ok;
}

Status linearFetch(Cpu &C, Hpa Pa) {
  return apicAccessExit(C, uint32_t(Pa.pageOffset()), exitqual::ApicAccessType::LinearFetch);
}

Status guestPhysicalExit(Cpu &C) {
  // Bits 11:0 are undefined for a guest-physical access; this model reports 0.
  return apicAccessExit(C, 0, exitqual::ApicAccessType::GuestPhysicalInstruction);
}

bool pendingApicWrite(Cpu &C, Status &St) {
  VmxEventState &E = C.Vmx->Events;
  if (!E.ApicWritePending) [[likely]]
    return false;
  E.ApicWritePending = false;
  const uint32_t Offset = E.ApicWriteOffset;
  // SDM Vol. 3C, "APIC-Write Emulation": a write to offset 080H clears bytes 081H-083H
  // and performs TPR virtualization; with "virtual-interrupt delivery" a write to EOI
  // (0B0H) performs EOI virtualization and one to ICR low (300H) that sends a fixed
  // edge-triggered self-IPI performs self-IPI virtualization; a write to ICR high (310H)
  // clears its bytes 2:0 and nothing else; any other virtualized write causes the
  // APIC-write VM exit, trap-like, with the page offset as its qualification
  // ("APIC-Write VM Exits"). It takes priority over SMIs, INIT and lower-priority events
  // and is not blocked by RFLAGS.IF, MOV SS or STI; after a fault delivered without a VM
  // exit it happens before the handler's first instruction, and a VM exit cancels it
  // (VM entry resets the pending state).
  if (Offset == kVtpr) {
    C.Mem.write(Hpa(virtualApic(C) + kVtpr), 4, readVirtualApic32(C, kVtpr) & 0xff,
                StoreAgent::Processor);
    St = tprVirtualization(C);
    return St != Status::Ok;
  }
  if (Offset == kVeoi && ctl(C, VmxControl::VirtualInterruptDelivery)) {
    St = eoiVirtualization(C);
    return St != Status::Ok;
  }
  if (Offset == kVicrHi) {
    // "The processor clears bytes 2:0 of VICR_HI. No other virtualization or VM exit
    // occurs."
    C.Mem.write(Hpa(virtualApic(C) + kVicrHi), 4, readVirtualApic32(C, kVicrHi) & 0xff000000u,
                StoreAgent::Processor);
    return false;
  }
  if (Offset == kVicrLo && ctl(C, VmxControl::VirtualInterruptDelivery)) {
    const uint32_t IcrLo = readVirtualApic32(C, kVicrLo);
    if (virtualizableSelfIpi(IcrLo)) {
      selfIpiVirtualization(C, uint8_t(IcrLo));
      return false;
    }
  }
  VmExitInfo Info;
  Info.Reason = ExitReason::ApicWrite;
  Info.Qualification = exitqual::apic_write::Offset.set(0, Offset);
  E.MtfPending = false;
  St = vmExit(C, Info);
  return true;
}

Status movToCr8(Cpu &C, const DecodedInsn &I, uint64_t Value) {
  // "bits 63:4 of the source operand must be 0" still applies (#GP(0)); VTPR[7:4] =
  // source[3:0], the rest of VTPR cleared (SDM Vol. 3C, "Virtualizing CR8-Based TPR
  // Accesses").
  if (Value >> 4)
    return C.raiseGp(0);
  C.Mem.write(Hpa(virtualApic(C) + kVtpr), 4, uint32_t(Value & 0xf) << 4,
              StoreAgent::Processor);
  C.breakBlock();
  VMX_TRY(next(C, I));
  return tprVirtualization(C);
}

uint64_t movFromCr8(const Cpu &C) { return (readVirtualApic32(C, kVtpr) >> 4) & 0xf; }

// SDM Vol. 3C, "Virtualizing MSR-Based APIC Accesses": with "virtualize x2APIC mode",
// RDMSR of 808H reads bytes 087H:080H of the virtual-APIC page; with "APIC-register
// virtualization" too, any ECX in 800H-8FFH reads the 8 bytes at (ECX & FFH) << 4. This
// happens "even if the local APIC is not in x2APIC mode". Other MSRs of the range operate
// normally.
Status rdmsr(Cpu &C, const DecodedInsn &I, uint32_t Msr, bool &Done) {
  Done = false;
  if ((Msr & ~0xffu) != 0x800 || !ctl(C, VmxControl::VirtualizeX2apicMode))
    return Status::Ok;
  if (Msr != 0x808 && !ctl(C, VmxControl::ApicRegisterVirtualization))
    return Status::Ok;
  const uint64_t V = C.Mem.read(Hpa(virtualApic(C) + ((Msr & 0xff) << 4)), 8);
  C.S.Gpr[RAX] = uint32_t(V);
  C.S.Gpr[RDX] = uint32_t(V >> 32);
  Done = true;
  return next(C, I);
}

// WRMSR of 808H with "virtualize x2APIC mode": #GP(0) when bits 63:8 of EDX:EAX are not
// 0; else EDX:EAX is stored to bytes 087H:080H of the virtual-APIC page, followed by TPR
// virtualization. EOI (80BH) and SELF IPI (83FH) are virtualized with "virtual-interrupt
// delivery": EOI and self-IPI virtualization. The rest operates normally.
Status wrmsr(Cpu &C, const DecodedInsn &I, uint32_t Msr, bool &Done) {
  Done = false;
  if ((Msr & ~0xffu) != 0x800 || !ctl(C, VmxControl::VirtualizeX2apicMode))
    return Status::Ok;
  const uint64_t V = (uint64_t(uint32_t(C.S.Gpr[RDX])) << 32) | uint32_t(C.S.Gpr[RAX]);
  if (Msr == 0x808) {
    Done = true;
    if (V >> 8)
      return C.raiseGp(0);
    C.Mem.write(Hpa(virtualApic(C) + kVtpr), 8, V, StoreAgent::Processor);
    C.breakBlock();
    VMX_TRY(next(C, I));
    return tprVirtualization(C);
  }
  if (!ctl(C, VmxControl::VirtualInterruptDelivery))
    return Status::Ok;
  if (Msr == 0x80b) {
    // EOI: "If the value of EDX:EAX is not 0, a general-protection fault occurs".
    Done = true;
    if (V)
      return C.raiseGp(0);
    C.breakBlock();
    VMX_TRY(next(C, I));
    return eoiVirtualization(C);
  }
  if (Msr == 0x83f) {
    // SELF IPI: bits 63:8 must be 0; the vector is EAX[7:0].
    Done = true;
    if (V >> 8)
      return C.raiseGp(0);
    C.breakBlock();
    VMX_TRY(next(C, I));
    selfIpiVirtualization(C, uint8_t(V));
    return Status::Ok;
  }
  return Status::Ok;
}

void onVmEntry(Cpu &C) {
  if (ctl(C, VmxControl::VirtualizeApicAccesses))
    C.Mmu.dropPageMappings(C.Vmx->Vmcs.get(F::ApicAccessAddress) >> 12);
  // "VM entry loads the values of RVI and SVI from the guest interrupt-status field ...
  // the logical processor first causes PPR virtualization and then evaluates pending
  // virtual interrupts" (SDM Vol. 3C, "Updating Non-Register State").
  if (ctl(C, VmxControl::VirtualInterruptDelivery)) {
    pprVirtualization(C);
    evaluatePendingVirtualInterrupts(C);
  }
}

bool virtualInterruptDelivery(Cpu &C, Status &St) {
  VmxEventState &E = C.Vmx->Events;
  if (!E.VirtualInterruptRecognized) [[likely]]
    return false;
  // SDM Vol. 3C, "Virtual-Interrupt Delivery": a recognized virtual interrupt is
  // delivered when RFLAGS.IF = 1, there is no blocking by STI or MOV SS, and
  // "interrupt-window exiting" is 0 (checked at recognition); it wakes HLT but not
  // shutdown or wait-for-SIPI.
  if (!(C.S.Rflags & rflags::IF) || C.Retired < C.ShadowUntil ||
      (C.Activity != ActivityState::Active && C.Activity != ActivityState::Hlt))
    return false;
  const uint8_t Vector = rvi(C);
  setVectorBit(C, kVisr, Vector, true);
  setVectorBit(C, kVirr, Vector, false);
  const int Next = highestVector(C, kVirr);
  setInterruptStatus(C, Next < 0 ? 0 : uint8_t(Next), Vector);
  C.Mem.write(Hpa(virtualApic(C) + kVppr), 4, Vector & 0xf0u, StoreAgent::Processor);
  E.VirtualInterruptRecognized = false;
  C.Activity = ActivityState::Active;
  St = deliverEvent(C, EventKind::External, Vector, false, 0, C.S.Rip);
  return true;
}

bool virtualInterruptDue(const Cpu &C) {
  return C.Vmx->Events.VirtualInterruptRecognized && (C.S.Rflags & rflags::IF);
}

bool postedInterrupt(Cpu &C, uint8_t Vector) {
  if (!ctl(C, VmxControl::ProcessPostedInterrupts) ||
      Vector != uint8_t(C.Vmx->Vmcs.get(F::PostedInterruptNotificationVector)))
    return false;
  // SDM Vol. 3C, "Posted-Interrupt Processing": (1) clear the outstanding-notification
  // bit (bit 256 of the descriptor); (2) dismiss the interrupt with an EOI to the local
  // APIC; (3) OR the PIR (bits 255:0) into VIRR and clear it; (4) RVI = max(RVI, the
  // highest PIR index); (5) evaluate pending virtual interrupts. The descriptor is 64
  // bytes, 64-byte aligned (a VM-entry check), so it never crosses a page.
  const uint64_t Desc = C.Vmx->Vmcs.get(F::PostedInterruptDescriptorAddress);
  C.Mem.write(Hpa(Desc + 32), 1, C.Mem.read(Hpa(Desc + 32), 1) & ~uint64_t(1),
              StoreAgent::Processor);
  C.Intr->endOfInterrupt();
  int Highest = -1;
  for (unsigned Word = 0; Word < 8; ++Word) {
    const uint32_t Pir = uint32_t(C.Mem.read(Hpa(Desc + 4 * Word), 4));
    if (!Pir)
      continue;
    C.Mem.write(Hpa(Desc + 4 * Word), 4, 0, StoreAgent::Processor);
    const Hpa Virr(virtualApic(C) + kVirr + 16 * Word);
    C.Mem.write(Virr, 4, uint32_t(C.Mem.read(Virr, 4)) | Pir, StoreAgent::Processor);
    Highest = int(Word * 32 + 31 - __builtin_clz(Pir));
  }
  if (Highest > rvi(C))
    setInterruptStatus(C, uint8_t(Highest), svi(C));
  evaluatePendingVirtualInterrupts(C);
  return true;
}

} // namespace vmxsim::apicv
