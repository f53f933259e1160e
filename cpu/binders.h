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

} // namespace vmxsim
