/* I/O-instruction exits ("unconditional I/O exiting" = 1, no I/O bitmaps: every IN and
 * OUT exits; SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally" > IN, OUT).
 *
 * Emulated: OUT to the UART's transmit register 0x3f8 is forwarded (collected per line
 * and printed after the exit line); IN from its line-status register 0x3fd returns 0x60
 * (transmit holding register and transmitter empty: the guest may always send). Other
 * OUTs are dropped, other INs read all ones, as from an unclaimed ISA port.
 */
#include "lib/string.h"
#include "vmx/exit.h"

#define UART_THR_PORT 0x3f8
#define UART_LSR_PORT 0x3fd
#define UART_LSR_IDLE 0x60

static void uartForward(struct PerCpu *Cpu, char C) {
  if (C != '\n' && Cpu->UartLineLen + 1 < sizeof(Cpu->UartLine)) {
    Cpu->UartLine[Cpu->UartLineLen++] = C;
    return;
  }
  if (C != '\n')
    Cpu->UartLine[Cpu->UartLineLen++] = C;
  Cpu->UartLine[Cpu->UartLineLen] = 0;
  exitNote(Cpu, "guest uart: %s", Cpu->UartLine);
  Cpu->UartLineLen = 0;
}

enum ExitAction handleIo(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint64_t Q = Cpu->Exit.Qualification;
  uint32_t Port = EXIT_QUAL(Q, io, PortNumber);
  uint32_t Size = EXIT_QUAL(Q, io, SizeOfAccess) + 1;
  uint32_t In = EXIT_QUAL(Q, io, Direction);
  /* Xen 3.0.3 traced the port and the direction; the size and the data complete
     the picture (Xen 3.0.4 added the data). */
  TRACE_VMEXIT(1, Port);
  TRACE_VMEXIT(2, In);
  TRACE_VMEXIT(3, Size);
  if (EXIT_QUAL(Q, io, StringInstruction)) {
    exitNote(Cpu, "string I/O (INS/OUTS) is not emulated");
    return Action_Stop;
  }
  uint64_t Mask = Size == 8 ? ~0ull : (1ull << (8 * Size)) - 1;
  if (In) {
    uint64_t Value = Mask;
    if (Port == UART_LSR_PORT && Size == 1)
      Value = UART_LSR_IDLE;
    /* SDM Vol. 1, "General-Purpose Registers in 64-Bit Mode": an 8- or 16-bit result
       leaves the rest of RAX alone, a 32-bit result zero-extends. */
    Regs->Rax = Size == 4 ? Value : (Regs->Rax & ~Mask) | Value;
    TRACE_VMEXIT(4, Value);
  } else {
    uint64_t Value = Regs->Rax & Mask;
    TRACE_VMEXIT(4, Value);
    if (Port == UART_THR_PORT && Size == 1)
      uartForward(Cpu, (char)Value);
  }
  return Action_Advance;
}
