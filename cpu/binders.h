// Binders shared between instruction families: a family's binder hands a form it does
// not own to the family that does (e.g. MOV to a control register goes to the system
// family). The per-mnemonic binders are declared by cpu/insns.def.
#pragma once
#include "cpu/decode_info.h"

namespace vmxsim {

bool bindMovSystem(const DecodeInfo &D, DecodedInsn &I); ///< MOV Sreg/CRn/DRn forms
bool bindPushSeg(const DecodeInfo &D, DecodedInsn &I);   ///< PUSH ES/CS/SS/DS/FS/GS
bool bindPopSeg(const DecodeInfo &D, DecodedInsn &I);    ///< POP ES/SS/DS/FS/GS
bool bindFarJmp(const DecodeInfo &D, DecodedInsn &I);    ///< JMP ptr16:xx / m16:xx
bool bindFarCall(const DecodeInfo &D, DecodedInsn &I);   ///< CALL ptr16:xx / m16:xx
bool bindFarRet(const DecodeInfo &D, DecodedInsn &I);    ///< RET far (CB, CA iw)
/// Zydis names the SSE2 scalar move and the string move A5 (32-bit operand size) both
/// MOVSD. The MOVSD row (cpu/insns_sse.def) binds the XMM form with bindMovsdXmm and hands
/// the string form to bindMovsString (cpu/exec_string.cpp).
bool bindMovsdXmm(const DecodeInfo &D, DecodedInsn &I);
bool bindMovsString(const DecodeInfo &D, DecodedInsn &I);
/// Likewise CMPSD: the string family's CMPSD row (cpu/insns_string.def) binds the string
/// form A7 and hands the XMM compare to bindCmpsdXmm (cpu/exec_sse_fp.cpp).
bool bindCmpsdXmm(const DecodeInfo &D, DecodedInsn &I);

} // namespace vmxsim
