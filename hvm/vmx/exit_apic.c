/* APIC virtualization for the guest (GuestSetup.Apicv; SDM Vol. 3C, "APIC Virtualization
 * and Virtual Interrupts"), as Xen's vmx_vlapic and posted-interrupt code use it when the
 * processor offers it: the guest's memory-mapped local APIC at 0xfee00000 is the
 * APIC-access page, its registers live on a virtual-APIC page per vCPU, and interrupts
 * reach it without a VM exit:
 *   - "APIC-register virtualization": reads of its registers come from the virtual-APIC
 *     page; writes to TPR, EOI and ICR low are virtualized, a write to any other
 *     writable register is done to the page and then exits (APIC write, reason 56,
 *     trap-like: the qualification is the register's offset; the core accepts it);
 *   - "virtual-interrupt delivery": RVI/SVI in the guest interrupt status, a self-IPI
 *     through ICR low and the EOIs are virtualized; an EOI of a vector set in the
 *     EOI-exit bitmap exits (virtualized EOI, reason 45, trap-like, the vector in the
 *     qualification), which is how a hypervisor learns a level-triggered interrupt is
 *     done;
 *   - "process posted interrupts": another vCPU's core posts a vector (hypercall 8) by
 *     setting its bit in the target's posted-interrupt descriptor (PIR, bits 255:0) and
 *     the outstanding-notification bit ON (bit 256), and sends the target's CPU an IPI
 *     with the notification vector; in VMX non-root operation the target processor
 *     acknowledges it, moves PIR into the virtual IRR and delivers the vector to the
 *     guest without a VM exit (SDM Vol. 3C, "Posted-Interrupt Processing"). Arriving
 *     while the target is in root operation (IF = 0), it waits in the local APIC and is
 *     processed right after the next VM entry.
 */
#include "lib/cpu.h"
#include "lib/smp.h"
#include "vmx/exit.h"
#include "vmx/insn.h"

/* SDM Vol. 3C, "Posted-Interrupt Descriptor": 64 bytes, 64-byte aligned; PIR in bits
   255:0, ON in bit 256. */
struct PostedInterruptDescriptor {
  volatile uint64_t Pir[4];
  volatile uint64_t Control; /* bit 0 (descriptor bit 256): ON */
  uint64_t Reserved[3];
} __attribute__((aligned(64)));

/* Zero at load and never cleared afterwards: a vCPU may be posted to before its own
   setup has run. */
static struct PostedInterruptDescriptor Pids[HVM_MAX_CPUS];
static uint8_t VirtualApicPages[HVM_MAX_CPUS][4096] __attribute__((aligned(4096)));
static uint32_t HostApicIds[HVM_MAX_CPUS];
static volatile uint32_t Ready[HVM_MAX_CPUS];
static uint32_t VcpuCount = 1;

void vmxApicvSetVcpuCount(uint32_t N) { VcpuCount = N ? N : 1; }

/* The APIC version register the guest reads: version 0x14, 6 LVT entries (max LVT 5),
   as the xAPIC of the processors that offer APICv report (SDM Vol. 3A, "Local APIC
   Version Register"). */
#define HV_APICV_VERSION 0x00050014u
#define LAPIC_VERSION 0x30
#define PIR_ON 1ull
/* ICR: fixed delivery, physical destination, edge, no shorthand (SDM Vol. 3A,
   "Interrupt Command Register (ICR)"); the destination APIC ID in ICR high bits 31:24. */
#define ICR_DELIVERY_STATUS (1u << 12)

bool vmxApicvSetup(struct PerCpu *Cpu) {
  uint32_t N = Cpu->CpuNumber;
  if (N >= HVM_MAX_CPUS)
    return false;
  uint8_t *Page = VirtualApicPages[N];
  for (unsigned I = 0; I < sizeof(VirtualApicPages[N]); ++I)
    Page[I] = 0;
  /* The virtual APIC's ID is the vCPU number, its version the one above. */
  *(volatile uint32_t *)(Page + LAPIC_ID) = N << 24;
  *(volatile uint32_t *)(Page + LAPIC_VERSION) = HV_APICV_VERSION;
  HostApicIds[N] = apicId();
  /* The host's local APIC software-enabled, so the notification IPI is accepted. */
  *lapic(LAPIC_SVR) = (1u << 8) | 0xff;
  vmwrite(Vmcs_VirtualApicAddress, (uint64_t)(uintptr_t)Page);
  vmwrite(Vmcs_ApicAccessAddress, LAPIC_BASE);
  vmwrite(Vmcs_TprThreshold, 0);
  vmwrite(Vmcs_GuestInterruptStatus, 0);
  /* The EOI of the posted vector exits (reason 45); the self-IPI's does not. */
  vmwrite(Vmcs_EoiExitBitmap0, 0);
  vmwrite(Vmcs_EoiExitBitmap1, 0);
  vmwrite(Vmcs_EoiExitBitmap2, 0);
  vmwrite(Vmcs_EoiExitBitmap3, 0);
  vmwrite(Vmcs_EoiExitBitmap0 + 2 * (HV_APICV_POSTED_VECTOR / 64),
          1ull << (HV_APICV_POSTED_VECTOR % 64));
  vmwrite(Vmcs_PostedInterruptNotificationVector, HV_POSTED_NOTIFICATION_VECTOR);
  vmwrite(Vmcs_PostedInterruptDescriptorAddress, (uint64_t)(uintptr_t)&Pids[N]);
  Cpu->Apicv = 1;
  __atomic_store_n(&Ready[N], 1, __ATOMIC_RELEASE);
  return true;
}

enum ExitAction vmxPostInterrupt(struct PerCpu *Cpu, uint64_t Vector) {
  if (!Cpu->Apicv || Vector < 16 || Vector > 255)
    return Action_Stop;
  uint32_t Target = (Cpu->CpuNumber + 1) % VcpuCount;
  /* The target's descriptor and local APIC are ready once its setup has run. */
  while (!__atomic_load_n(&Ready[Target], __ATOMIC_ACQUIRE))
    __builtin_ia32_pause();
  struct PostedInterruptDescriptor *D = &Pids[Target];
  __atomic_or_fetch(&D->Pir[Vector / 64], 1ull << (Vector % 64), __ATOMIC_SEQ_CST);
  /* Notify only when ON was clear (SDM Vol. 3C, "Posted-Interrupt Processing": software
     sets ON and sends the notification; the processor clears ON when it processes). */
  if (!(__atomic_fetch_or(&D->Control, PIR_ON, __ATOMIC_SEQ_CST) & PIR_ON)) {
    while (*lapic(LAPIC_ICR_LO) & ICR_DELIVERY_STATUS)
      __builtin_ia32_pause();
    *lapic(LAPIC_ICR_HI) = HostApicIds[Target] << 24;
    *lapic(LAPIC_ICR_LO) = HV_POSTED_NOTIFICATION_VECTOR;
  }
  ++Cpu->PostsSent;
  return Action_Advance;
}

enum ExitAction handleVirtualizedEoi(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* SDM Vol. 3C, "Exit Qualification for EOI Virtualization": bits 7:0, the vector whose
     EOI was virtualized. Trap-like: RIP is past the EOI write already. */
  uint64_t Vector = Cpu->Exit.Qualification & 0xff;
  TRACE_VMEXIT(1, Vector);
  if (Vector != HV_APICV_POSTED_VECTOR) {
    exitNote(Cpu, "virtualized EOI of vector 0x%lx, not in the EOI-exit bitmap", Vector);
    return Action_Stop;
  }
  ++Cpu->VirtualEois;
  return Action_Resume;
}

enum ExitAction handleApicWrite(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* SDM Vol. 3C, "Exit Qualification for APIC-Write VM Exits": bits 11:0, the offset of
     the register written; the value is on the virtual-APIC page. Trap-like. The guest's
     local APIC timer is not emulated: the core accepts the LVT write and nothing else. */
  uint64_t Offset = Cpu->Exit.Qualification & 0xfff;
  TRACE_VMEXIT(1, Offset);
  if (Offset != LAPIC_LVT_TIMER) {
    exitNote(Cpu, "APIC write to offset 0x%lx", Offset);
    return Action_Stop;
  }
  ++Cpu->ApicWrites;
  return Action_Resume;
}
