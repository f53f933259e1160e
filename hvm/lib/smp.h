/* Multiprocessor bring-up shared by the smp, smp_work and hv images: the local APIC's
   registers, the CPUs listed in the ACPI MADT, and INIT-SIPI-SIPI through the real-mode
   trampoline (smp_trampoline.S). */
#pragma once
#include <stdint.h>

#define SMP_MAX_CPUS 64

/* SDM Vol. 3A, Local APIC Register Address Map. */
#define LAPIC_BASE 0xfee00000ull
#define LAPIC_ID 0x20
#define LAPIC_EOI 0xb0
#define LAPIC_SVR 0xf0
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310
#define LAPIC_LVT_TIMER 0x320
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_DIV 0x3e0

static inline volatile uint32_t *lapic(uint32_t Reg) {
  return (volatile uint32_t *)(uintptr_t)(LAPIC_BASE + Reg);
}
static inline uint32_t apicId(void) { return *lapic(LAPIC_ID) >> 24; }

/* The APIC IDs of the enabled processors in the MADT; returns their number. */
unsigned smpFindCpus(uint8_t *Ids);
/* Starts every processor in Ids except the caller, one at a time; each runs Entry in
   64-bit mode on its own stack with the BSP's CR3 and EFER, and must call
   smpApStarted() first. Returns when all have. */
void smpStartAps(const uint8_t *Ids, unsigned N, void (*Entry)(void));
void smpApStarted(void);
