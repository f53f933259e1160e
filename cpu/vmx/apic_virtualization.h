// APIC virtualization (SDM Vol. 3C, "APIC Virtualization and Virtual Interrupts"): the
// virtual-APIC page and TPR virtualization, memory-mapped APIC accesses through the
// APIC-access page ("virtualize APIC accesses", with "APIC-register virtualization"), the
// APIC-access and APIC-write VM exits, and MSR-based APIC accesses ("virtualize x2APIC
// mode"). Virtual-interrupt delivery and posted-interrupt processing are not modelled:
// no profile advertises them, so VM entry refuses their controls and the paths that would
// need them stop the run as unimplemented.
//
// Hooks, each reached only in VMX non-root operation:
//   cpu/mmu.cpp         onApicAccessPage: no TLB entry is ever made for the page
//   cpu/memory.cpp      linearRead, linearWrite, linearFetch for accesses to the page
//   cpu/translation.cpp guestPhysicalExit for guest paging-structure accesses and PDPTE
//                       loads (under EPT) that land on the page
//   cpu/vmx/vmx_events.cpp  pendingApicWrite at the boundary after a virtualized write,
//                       virtualInterruptDelivery, virtualInterruptDue, postedInterrupt
//   cpu/vmx/nonroot.cpp MOV to/from CR8, RDMSR/WRMSR of 800H-8FFH
//   cpu/vmx/vm_entry.cpp    onVmEntry
#pragma once
#include "cpu/status.h"
#include "mmu/address.h"

#include <cstdint>

namespace vmxsim {

class Cpu;
struct DecodedInsn;

namespace apicv {

/// "Virtualize APIC accesses" is 1 and Pa is on the APIC-access page (SDM Vol. 3C,
/// "Virtualizing Memory-Mapped APIC Accesses": the physical address, after EPT when EPT
/// is in use, is compared with the APIC-access address).
bool onApicAccessPage(const Cpu &C, Hpa Pa);

/// A linear access of SizeBytes at Pa on the APIC-access page, by an instruction or by
/// event delivery (SDM Vol. 3C, "Virtualizing Reads from the APIC-Access Page" and
/// "Virtualizing Writes to the APIC-Access Page"): virtualized through the virtual-APIC
/// page, or the APIC-access VM exit (Status::VmExit). A virtualized write arms
/// APIC-write emulation for the next instruction boundary.
Status linearRead(Cpu &C, Hpa Pa, unsigned SizeBytes, uint8_t *Out);
Status linearWrite(Cpu &C, Hpa Pa, unsigned SizeBytes, const uint8_t *In);
/// An instruction fetch from the page: always the APIC-access VM exit.
Status linearFetch(Cpu &C, Hpa Pa);
/// A guest-physical access (guest paging-structure entry, its A/D update, a PDPTE load)
/// whose EPT translation is on the page: always the APIC-access VM exit, access type 10
/// during event delivery, else 15 (SDM Vol. 3C, "Guest-Physical Accesses to the
/// APIC-Access Page").
Status guestPhysicalExit(Cpu &C);

/// At the instruction boundary after an operation that virtualized a write: APIC-write
/// emulation (SDM Vol. 3C, "APIC-Write Emulation"). True when it performed a VM exit
/// (TPR below threshold, APIC write); St then holds its status.
bool pendingApicWrite(Cpu &C, Status &St);

/// MOV to CR8 with "use TPR shadow" (after the CR8-load exiting check): VTPR and TPR
/// virtualization, RIP advanced (SDM Vol. 3C, "Virtualizing CR8-Based TPR Accesses").
Status movToCr8(Cpu &C, const DecodedInsn &I, uint64_t Value);
/// MOV from CR8 with "use TPR shadow": VTPR[7:4].
uint64_t movFromCr8(const Cpu &C);

/// RDMSR/WRMSR of ECX = Msr that did not exit by the MSR bitmaps (SDM Vol. 3C,
/// "Virtualizing MSR-Based APIC Accesses"). Done = true when the access was virtualized
/// (the instruction is complete: RIP advanced, and a TPR-below-threshold exit may have
/// followed) or faulted; false when the instruction operates normally.
Status rdmsr(Cpu &C, const DecodedInsn &I, uint32_t Msr, bool &Done);
Status wrmsr(Cpu &C, const DecodedInsn &I, uint32_t Msr, bool &Done);

/// VM entry, after the guest state is loaded: no TLB entry may map the APIC-access page
/// of a VMCS that virtualizes APIC accesses (entries made while it was not are dropped);
/// with "virtual-interrupt delivery", PPR virtualization and the evaluation of pending
/// virtual interrupts.
void onVmEntry(Cpu &C);

/// The event window's slot for virtual-interrupt delivery, the priority of the
/// interrupt-window exit (SDM Vol. 3C, "Virtual-Interrupt Delivery"): delivers a
/// recognized virtual interrupt when nothing blocks it. True when it did; St holds the
/// delivery's status.
bool virtualInterruptDelivery(Cpu &C, Status &St);
/// A recognized virtual interrupt that RFLAGS.IF lets through wakes a halted guest.
bool virtualInterruptDue(const Cpu &C);

/// An external interrupt acknowledged in non-root operation with "process posted
/// interrupts": when Vector is the posted-interrupt notification vector, posted-interrupt
/// processing (true; no VM exit); else false (the caller's VM exit reports Vector).
bool postedInterrupt(Cpu &C, uint8_t Vector);

} // namespace apicv
} // namespace vmxsim
