// The Zydis boundary: decodes guest code into blocks of DecodedInsn (STYLE 2.2).
#pragma once
#include "cpu/cpu.h"
#include "cpu/decode_info.h"

namespace vmxsim {

/// Decodes the block at CS:RIP into the block cache (or, for an instruction that crosses
/// a page boundary, into an uncached scratch block) and points Out at it. Fetch faults
/// are pending in C and returned as Status::Fault.
Status decodeBlock(Cpu &C, Block *&Out);

/// Decodes one instruction from a byte buffer in the given mode, binding its handler.
/// Returns false if the bytes are not a valid instruction (the handler is then #UD).
bool decodeOne(const uint8_t *Bytes, unsigned Size, CodeMode Mode, DecodedInsn &Out);

/// Zydis's own verdict on the bytes, independent of whether vmxsim binds a handler (for
/// decoder cross-check tests): true for a valid encoding, with its length in Len and the
/// decoder's mnemonic number in Mnemonic.
bool decodeLength(const uint8_t *Bytes, unsigned Size, CodeMode Mode, unsigned &Len,
                  uint16_t &Mnemonic);

/// Mnemonic text for traces and messages.
const char *mnemonicName(uint16_t Mnemonic);

/// The handler bound to encodings the SDM makes #UD: raises #UD.
Status execInvalid(Cpu &C, const DecodedInsn &I);
/// An instruction the decoder knows and no binder handles: #UD when the processor does
/// not report its extension in CPUID (as on such a processor), else the run stops as
/// unimplemented, naming the instruction (never a guest #UD for something vmxsim lacks).
Status execUnbound(Cpu &C, const DecodedInsn &I);

} // namespace vmxsim
