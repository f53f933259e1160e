/* CPU exceptions: the IDT, the frame the stubs build, and one-shot recovery for tests. */
#ifndef HVM_BOOT_EXCEPTIONS_H
#define HVM_BOOT_EXCEPTIONS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What exceptions.S pushes, lowest address first: the general registers in reverse
/// push order, the vector and error code (0 when the CPU pushes none), then the frame
/// the CPU pushes in 64-bit mode.
struct ExcFrame {
  uint64_t R15, R14, R13, R12, R11, R10, R9, R8;
  uint64_t Rbp, Rdi, Rsi, Rdx, Rcx, Rbx, Rax;
  uint64_t Vector, ErrorCode;
  uint64_t Rip, Cs, Rflags, Rsp, Ss;
};

/// A test that wants to see an exception sets Vector and ResumeRip, then Armed = 1,
/// then causes it. The handler fills the Seen* fields, clears Armed and resumes at
/// ResumeRip. Any other exception still stops the image.
struct ExcRecovery {
  uint32_t Armed;
  uint32_t Vector;
  uint64_t ResumeRip;
  uint64_t SeenVector, SeenErrorCode, SeenRip, SeenCr2;
};
extern volatile struct ExcRecovery ExcRecovery;

/// Installs the 32 exception gates and loads IDTR. Called by boot.S before kmain.
void idtInit(void);

/// Called by the stubs with interrupts disabled.
void excHandle(struct ExcFrame *Frame);

#ifdef __cplusplus
}
#endif

#endif
