/* EPT violations and misconfigurations (SDM Vol. 3C, "EPT Violations" and "EPT
 * Misconfigurations"). A violation in the lazily mapped region (vmx/ept.h) maps the page
 * and re-executes the instruction; anywhere else it stops the image, as does any
 * misconfiguration (our EPT has none, so one is a bug).
 */
#include "vmx/ept.h"
#include "vmx/exit.h"
#include "vmx/insn.h"

enum ExitAction handleEptViolation(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* Slots as Xen's NPF record: the guest-physical address, the host frame mapped, and
     the qualification (read/write/fetch, the entry's permissions, GLA valid). */
  uint64_t Gpa = vmread(Vmcs_GuestPhysicalAddress);
  TRACE_VMEXIT(1, Gpa);
  TRACE_VMEXIT(4, Cpu->Exit.Qualification);
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
