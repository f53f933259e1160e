/* The IDT and the common exception handler. Compiled with -mgeneral-regs-only: the
   recovery path returns to the interrupted code, whose SSE registers are not saved. */
#include "boot/exceptions.h"

#include "boot/boot.h"
#include "lib/cpu.h"
#include "lib/exit.h"
#include "lib/idt.h"
#include "lib/printf.h"

extern const uint64_t ExcStubs[32];
static struct IdtGate64 Idt[32] __attribute__((aligned(16)));
volatile struct ExcRecovery ExcRecovery;

void idtInit(void) {
  for (unsigned I = 0; I < 32; ++I)
    Idt[I] = idtInterruptGate(ExcStubs[I], BOOT_CS64);
  struct __attribute__((packed)) {
    uint16_t Limit;
    uint64_t Base;
  } Idtr = {sizeof(Idt) - 1, (uint64_t)(uintptr_t)Idt};
  __asm__ volatile("lidt %0" : : "m"(Idtr));
}

static const char *const ExcNames[32] = {
    "#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM", "#DF", "CSO", "#TS",
    "#NP", "#SS", "#GP", "#PF", "?15", "#MF", "#AC", "#MC", "#XM", "#VE", "#CP",
    "?22", "?23", "?24", "?25", "?26", "?27", "#HV", "#VC", "#SX", "?31"};

void excHandle(struct ExcFrame *F) {
  uint64_t Cr2 = readCr2();
  if (ExcRecovery.Armed && F->Vector == ExcRecovery.Vector) {
    ExcRecovery.SeenVector = F->Vector;
    ExcRecovery.SeenErrorCode = F->ErrorCode;
    ExcRecovery.SeenRip = F->Rip;
    ExcRecovery.SeenCr2 = Cr2;
    ExcRecovery.Armed = 0;
    F->Rip = ExcRecovery.ResumeRip;
    return;
  }
  printf("EXCEPTION vec=%lu err=0x%lx rip=0x%lx cr2=0x%lx (%s)\n", F->Vector,
         F->ErrorCode, F->Rip, Cr2, ExcNames[F->Vector & 31]);
  printf("  rax=0x%lx rbx=0x%lx rcx=0x%lx rdx=0x%lx\n", F->Rax, F->Rbx, F->Rcx,
         F->Rdx);
  printf("  rsi=0x%lx rdi=0x%lx rbp=0x%lx rsp=0x%lx\n", F->Rsi, F->Rdi, F->Rbp,
         F->Rsp);
  printf("  cs=0x%lx rflags=0x%lx cr0=0x%lx cr3=0x%lx cr4=0x%lx\n", F->Cs, F->Rflags,
         readCr0(), readCr3(), readCr4());
  hvmExit(HVM_EXIT_EXCEPTION);
}
