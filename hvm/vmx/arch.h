/* VMX architecture constants for the hypervisor core, in C.
 *
 * The VMCS field encodings, exit reasons, control bits, VM-instruction errors and MSR
 * numbers come from the emulator's tables (the .def files in cpu/vmx/, and
 * cpu/msrs.def), the single source of truth (STYLE 2.1): each row is expanded here
 * into a C enumerator, so the hypervisor and the emulator cannot disagree about an
 * encoding. Only the columns C needs are used; the macros drop the others unexpanded.
 *
 * C has no namespaces, so enumerators carry a prefix naming their table, as LLVM does
 * for plain enums: Vmcs_GuestRip, Reason_Cpuid, Proc_HltExiting, VmErr_..., MSR_... .
 */
#ifndef HVM_VMX_ARCH_H
#define HVM_VMX_ARCH_H

#include <stdint.h>

/* SDM Vol. 3D, Appendix B "Field Encoding in VMCS". */
enum VmcsField {
#define VMCS_FIELD(Name, Encoding, Width, Type, Feature, SdmName) Vmcs_##Name = Encoding,
#include "cpu/vmx/vmcs_fields.def"
#undef VMCS_FIELD
};

/* SDM Vol. 3D, Appendix C "VMX Basic Exit Reasons". */
enum ExitReason {
#define EXIT_REASON(Name, Number, Kind, SdmName) Reason_##Name = Number,
#include "cpu/vmx/exit_reasons.def"
#undef EXIT_REASON
  Reason_Count /* one past the largest basic exit reason: sizes the dispatch table */
};

/* Bit positions of the VM-execution, VM-exit and VM-entry controls (SDM Vol. 3C,
   "VM-Execution Control Fields", "VM-Exit Control Fields", "VM-Entry Control Fields"),
   named Word_Name: Pin_, Proc_, Proc2_, Proc3_, Exit_, Entry_. */
enum VmxControlBit {
#define VMX_CONTROL(Word, Bit, Name, Default, Feature, SdmName) Word##_##Name = Bit,
#include "cpu/vmx/vmx_controls.def"
#undef VMX_CONTROL
};
#define VMX_CTL(Bit) (1ull << (Bit))

/* SDM Vol. 3C, "VM Instruction Error Numbers". */
enum VmInstructionError {
#define VM_INSTRUCTION_ERROR(Name, Number, SdmName) VmErr_##Name = Number,
#include "cpu/vmx/vm_instruction_errors.def"
#undef VM_INSTRUCTION_ERROR
};

/* Architectural MSRs (SDM Vol. 4, "IA-32 Architectural MSRs") and the VMX capability
   MSRs (SDM Vol. 3D, Appendix A), from cpu/msrs.def. */
enum ArchMsr {
#define MSR(Name, Address, ...) MSR_##Name = Address,
#include "cpu/msrs.def"
#undef MSR
};


/* SDM Vol. 3D, A.1 "Basic VMX Information" (IA32_VMX_BASIC). */
#define VMX_BASIC_REVISION_MASK 0x7fffffffull /* bits 30:0 */
#define VMX_BASIC_REGION_SIZE(V) (((V) >> 32) & 0x1fff) /* bits 44:32 */
#define VMX_BASIC_MEMORY_TYPE(V) (((V) >> 50) & 0xf)    /* bits 53:50 */
#define VMX_BASIC_TRUE_CONTROLS (1ull << 55)
#define VMX_MEMORY_TYPE_WB 6

/* SDM Vol. 3C, "Enabling and Entering VMX Operation" (IA32_FEATURE_CONTROL). */
#define FEATURE_CONTROL_LOCK (1ull << 0)
#define FEATURE_CONTROL_VMXON_OUTSIDE_SMX (1ull << 2)

/* SDM Vol. 3A, "Control Registers". */
#define CR0_PE (1ull << 0)
#define CR0_TS (1ull << 3)
#define CR0_NE (1ull << 5)
#define CR0_NW (1ull << 29)
#define CR0_CD (1ull << 30)
#define CR0_PG (1ull << 31)
#define CR4_VMXE (1ull << 13)

/* SDM Vol. 2A, CPUID: CPUID.1:ECX.VMX[bit 5]. Bit 31 is the bit hypervisors set to
   say "a hypervisor is present" (the SDM lists it as unused and 0 on hardware). */
#define CPUID1_ECX_VMX (1u << 5)
#define CPUID1_ECX_HYPERVISOR (1u << 31)

/* SDM Vol. 3C, Table "Format of the VM-Entry Interruption-Information Field" and
   "Format of the VM-Exit Interruption-Information Field" (same layout for the fields
   used here: vector 7:0, type 10:8, deliver/valid error code 11, valid 31). */
#define INTR_INFO_VECTOR(V) ((V) & 0xff)
#define INTR_INFO_TYPE(V) (((V) >> 8) & 7)
#define INTR_INFO_TYPE_EXTERNAL (0u << 8)
#define INTR_INFO_TYPE_NMI (2u << 8)
#define INTR_INFO_TYPE_HW_EXCEPTION (3u << 8)
#define INTR_INFO_TYPE_SW_EXCEPTION (6u << 8)
#define INTR_INFO_ERROR_CODE (1u << 11)
#define INTR_INFO_VALID (1u << 31)

/* SDM Vol. 3C, "Basic VM-Exit Information" > Exit reason: bits 15:0 basic reason,
   bit 31 "VM-entry failure". */
#define EXIT_REASON_BASIC(V) ((V) & 0xffff)
#define EXIT_REASON_ENTRY_FAILURE (1u << 31)

/* Exit-qualification bit layouts (SDM Vol. 3C, "VM Exits" > "Basic VM-Exit
   Information", the exit-qualification tables), from cpu/vmx/exit_qualification.def:
   EXIT_QUAL(Q, io, PortNumber) extracts a field. */
enum ExitQualificationBits {
#define EXIT_QUALIFICATION_FIELD(Layout, Field, LowBit, Width, SdmContents)              \
  ExitQual_##Layout##_##Field##_Low = LowBit, ExitQual_##Layout##_##Field##_Width = Width,
#include "cpu/vmx/exit_qualification.def"
#undef EXIT_QUALIFICATION_FIELD
};
#define EXIT_QUAL(Q, Layout, Field)                                                    \
  ((uint32_t)(((Q) >> ExitQual_##Layout##_##Field##_Low) &                            \
              ((1ull << ExitQual_##Layout##_##Field##_Width) - 1)))

/* Access types of a control-register access (the cr_access AccessType field). */
enum CrAccessType { CrAccess_MovToCr = 0, CrAccess_MovFromCr = 1, CrAccess_Clts = 2, CrAccess_Lmsw = 3 };

/* The exception vectors the hypervisor injects (SDM Vol. 3A, "Exception and Interrupt
   Reference"). */
#define VECTOR_NMI 2
#define VECTOR_GP 13

/* SDM Vol. 1, "EFLAGS Register": IF. */
#define RFLAGS_IF (1ull << 9)
/* SDM Vol. 3C, Table "Format of Interruptibility State": blocking by STI, by MOV SS,
   by NMI. */
#define INTERRUPTIBILITY_STI (1u << 0)
#define INTERRUPTIBILITY_MOV_SS (1u << 1)
#define INTERRUPTIBILITY_NMI (1u << 3)

#endif
