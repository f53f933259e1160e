#include "lib/smp.h"

#include "lib/string.h"

#define AP_STACK_BYTES 8192
#define TRAMP_ADDR 0x8000

extern const uint8_t smpTrampoline[], smpTrampolineEnd[], smpTrampParams[];

static volatile uint32_t ApsStarted;
static uint8_t ApStacks[SMP_MAX_CPUS][AP_STACK_BYTES] __attribute__((aligned(16)));

/* Finds the processors in the MADT through the ACPI 1.0 RSDP in 0xe0000-0xfffff (ACPI
   6.5, "Finding the RSDP on IA-PC Systems"; MADT "Processor Local APIC" entries). */
unsigned smpFindCpus(uint8_t *Ids) {
  const uint8_t *Rsdp = 0;
  for (uintptr_t A = 0xe0000; A < 0x100000; A += 16)
    if (memcmp((const void *)A, "RSD PTR ", 8) == 0) {
      Rsdp = (const uint8_t *)A;
      break;
    }
  if (!Rsdp)
    return 0;
  const uint8_t *Rsdt = (const uint8_t *)(uintptr_t)*(const uint32_t *)(Rsdp + 16);
  uint32_t RsdtLen = *(const uint32_t *)(Rsdt + 4);
  unsigned N = 0;
  for (uint32_t E = 36; E + 4 <= RsdtLen; E += 4) {
    const uint8_t *T = (const uint8_t *)(uintptr_t)*(const uint32_t *)(Rsdt + E);
    if (memcmp(T, "APIC", 4) != 0)
      continue;
    uint32_t Len = *(const uint32_t *)(T + 4);
    for (uint32_t Off = 44; Off + 2 <= Len && T[Off + 1]; Off += T[Off + 1])
      if (T[Off] == 0 && (T[Off + 4] & 1) && N < SMP_MAX_CPUS)
        Ids[N++] = T[Off + 3];
  }
  return N;
}

static void sendIpi(uint8_t Dest, uint32_t Lo) {
  *lapic(LAPIC_ICR_HI) = (uint32_t)Dest << 24;
  *lapic(LAPIC_ICR_LO) = Lo;
}

void smpApStarted(void) { __atomic_add_fetch(&ApsStarted, 1, __ATOMIC_SEQ_CST); }

/* SDM Vol. 3A, MP Initialization > "Typical AP Initialization Sequence", without the
   delays vmxsim does not need. */
void smpStartAps(const uint8_t *Ids, unsigned N, void (*Entry)(void)) {
  /* The trampoline and its parameters: CR3, EFER and the 64-bit entry are the BSP's. */
  uint32_t Size = (uint32_t)(smpTrampolineEnd - smpTrampoline);
  memcpy((void *)TRAMP_ADDR, smpTrampoline, Size);
  volatile uint64_t *P = (volatile uint64_t *)(TRAMP_ADDR + (smpTrampParams - smpTrampoline));
  uint64_t Cr3, EferLo, EferHi;
  __asm__ volatile("mov %%cr3, %0" : "=r"(Cr3));
  __asm__ volatile("rdmsr" : "=a"(EferLo), "=d"(EferHi) : "c"(0xC0000080));
  (void)EferHi;
  P[0] = Cr3;
  P[1] = EferLo & ~(1ull << 10); /* LMA is set by the processor */
  P[3] = (uint64_t)(uintptr_t)Entry;

  uint32_t Self = apicId();
  unsigned Started = ApsStarted;
  for (unsigned I = 0; I < N; ++I) {
    if (Ids[I] == Self)
      continue;
    P[2] = (uint64_t)(uintptr_t)&ApStacks[Ids[I] % SMP_MAX_CPUS][AP_STACK_BYTES];
    sendIpi(Ids[I], 0x4500);                      /* INIT, level assert */
    sendIpi(Ids[I], 0x8500);                      /* INIT level de-assert */
    sendIpi(Ids[I], 0x4600 | (TRAMP_ADDR >> 12)); /* start-up, twice */
    sendIpi(Ids[I], 0x4600 | (TRAMP_ADDR >> 12));
    ++Started;
    while (ApsStarted != Started) /* one AP at a time: they share the parameters */
      __builtin_ia32_pause();
  }
}
