// A minimal x86-64 machine-code writer for the translator (cpu/jit/translator.cpp): the
// handful of instruction forms it emits, each encoded as the SDM Vol. 2 instruction pages
// define it (REX, ModR/M with a [base + disp] or register operand, immediates). Memory
// operands are [RBX + disp]: RBX holds the Cpu's address plus kCpuBias, so that the
// Cpu's first 256 bytes (the guest's registers, RIP, RFLAGS) are reached with a disp8.
// Every displacement and immediate takes its shortest encoding (SDM Vol. 2, 2.1.5
// "Addressing-Mode Encoding of ModR/M and SIB Bytes": mod 01 is disp8, sign-extended).
// Writes into a caller's buffer; running out of room sets Overflow and writes nothing
// more.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vmxsim::x64 {

enum Reg : uint8_t { HAX, HCX, HDX, HBX, HSP, HBP, HSI, HDI, H8, H9, H10, H11, H12, H13, H14, H15 };

/// ALU opcode bases (the "op r/m, r" forms are Base + 0 for 8-bit, Base + 1 otherwise)
/// and the /digit of the group-1 immediate forms.
enum class Alu : uint8_t { Add = 0, Or = 1, Adc = 2, Sbb = 3, And = 4, Sub = 5, Xor = 6, Cmp = 7 };
/// /digit of the group-2 shift and rotate forms.
enum class Shift : uint8_t { Rol = 0, Ror = 1, Shl = 4, Shr = 5, Sar = 7 };

/// RBX = the Cpu's address + kCpuBias in translated code (offsets given to the emitter are
/// from the Cpu's address; it subtracts the bias).
inline constexpr int32_t kCpuBias = 128;

inline constexpr bool fitsInt8(int64_t V) { return V >= -128 && V <= 127; }

class Emitter {
public:
  Emitter(uint8_t *Buf, size_t Cap) : Buf(Buf), Cap(Cap) {}
  size_t size() const { return Len; }
  bool overflow() const { return Overflow; }
  uint8_t *data() { return Buf; }

  void byte(uint8_t B) {
    if (Len < Cap)
      Buf[Len++] = B;
    else
      Overflow = true;
  }
  void u32(uint32_t V) {
    for (unsigned K = 0; K < 4; ++K)
      byte(uint8_t(V >> (8 * K)));
  }
  void u64(uint64_t V) {
    for (unsigned K = 0; K < 8; ++K)
      byte(uint8_t(V >> (8 * K)));
  }

  // --- operand encodings ---
  /// Operand-size prefix and REX for an operation of Size bytes between register Reg
  /// (ModR/M.reg) and register or base Rm (ModR/M.rm).
  void prefix(unsigned Size, unsigned Reg, unsigned Rm) {
    if (Size == 2)
      byte(0x66);
    const uint8_t Rex = uint8_t(0x40 | (Size == 8 ? 8 : 0) | ((Reg >> 3) & 1) << 2 | ((Rm >> 3) & 1));
    if (Rex != 0x40)
      byte(Rex);
  }
  /// [RBX + Disp - kCpuBias]: Disp is an offset in the Cpu.
  void modrmMem(unsigned Reg, int32_t Disp) { modrmDisp(Reg, HBX, Disp - kCpuBias); }
  /// ModR/M (and SIB for RSP/R12) of [Base + Disp], the shortest form: no displacement
  /// (not with RBP/R13, whose mod 00 means RIP-relative / disp32), disp8, disp32.
  void modrmDisp(unsigned Reg, unsigned Base, int32_t Disp) {
    const uint8_t Mod = Disp == 0 && (Base & 7) != HBP ? 0x00 : fitsInt8(Disp) ? 0x40 : 0x80;
    byte(uint8_t(Mod | (Reg & 7) << 3 | (Base & 7)));
    if ((Base & 7) == HSP)
      byte(0x24); // SIB: base RSP/R12, no index
    dispOf(Mod, Disp);
  }
  void dispOf(uint8_t Mod, int32_t Disp) {
    if (Mod == 0x40)
      byte(uint8_t(Disp));
    else if (Mod == 0x80)
      u32(uint32_t(Disp));
  }
  void modrmReg(unsigned Reg, unsigned Rm) { byte(uint8_t(0xc0 | (Reg & 7) << 3 | (Rm & 7))); }

  /// Op8 (8-bit) or Op (16/32/64-bit) with Reg, [RBX + Disp].
  void opMem(unsigned Size, uint8_t Op8, uint8_t Op, unsigned Reg, int32_t Disp) {
    prefix(Size, Reg, HBX);
    byte(Size == 1 ? Op8 : Op);
    modrmMem(Reg, Disp);
  }
  void opReg(unsigned Size, uint8_t Op8, uint8_t Op, unsigned Reg, unsigned Rm) {
    prefix(Size, Reg, Rm);
    byte(Size == 1 ? Op8 : Op);
    modrmReg(Reg, Rm);
  }

  // --- instructions ---
  void load(unsigned Size, Reg R, int32_t Disp) { opMem(Size, 0x8a, 0x8b, R, Disp); }
  void store(unsigned Size, Reg R, int32_t Disp) { opMem(Size, 0x88, 0x89, R, Disp); }
  /// The opcode of MOVZX r32, r/m8|16 (Signed false; Size 1, 2) or of MOVSX r64,
  /// r/m8|16 and MOVSXD r64, r/m32 (Signed; Size 1, 2, 4).
  void extendOpcode(bool Signed, unsigned Size) {
    if (Signed && Size == 4) {
      byte(0x63);
      return;
    }
    byte(0x0f);
    byte(uint8_t((Signed ? 0xbe : 0xb6) + (Size == 2)));
  }
  /// MOVZX r32 (Signed false) or MOVSX/MOVSXD r64 (Signed) of the Size-byte register Rm
  /// (Mem false; a byte register below 8 must be AL..BL: no REX is added for SPL..DIL)
  /// or [RBX + Disp] (Mem); a plain MOV when nothing is extended (4 or 8 bytes zero-, 8
  /// sign-extended).
  void extend(bool Signed, unsigned Size, Reg R, bool Mem, int32_t RmOrDisp) {
    if (Signed ? Size == 8 : Size >= 4) {
      if (Mem)
        load(Size, R, RmOrDisp);
      else
        movRR(Size, R, Reg(RmOrDisp));
      return;
    }
    prefix(Signed ? 8 : 4, R, Mem ? unsigned(HBX) : unsigned(RmOrDisp));
    extendOpcode(Signed, Size);
    if (Mem)
      modrmMem(R, RmOrDisp);
    else
      modrmReg(R, unsigned(RmOrDisp));
  }
  void loadZx(unsigned Size, Reg R, int32_t Disp) { extend(false, Size, R, true, Disp); }
  void loadSx64(unsigned Size, Reg R, int32_t Disp) { extend(true, Size, R, true, Disp); }
  void movZxRR(unsigned Size, Reg Dst, Reg Src) { extend(false, Size, Dst, false, Src); }
  void movSxRR(unsigned Size, Reg Dst, Reg Src) { extend(true, Size, Dst, false, Src); }
  void movRR(unsigned Size, Reg Dst, Reg Src) { opReg(Size, 0x88, 0x89, Src, Dst); }
  void movImm32(Reg R, uint32_t V) { // zero-extends into the 64-bit register
    if (R >= 8)
      byte(0x41);
    byte(uint8_t(0xb8 + (R & 7)));
    u32(V);
  }
  /// R = V: MOV r32, imm32 (zero-extends) or MOV r/m64, imm32 (C7 /0, sign-extends)
  /// when either gives V, else MOV r64, imm64.
  void movImm64(Reg R, uint64_t V) {
    if (V <= 0xffffffffu)
      return movImm32(R, uint32_t(V));
    if (int64_t(V) >= INT32_MIN && int64_t(V) < 0) {
      byte(uint8_t(0x48 | (R >= 8 ? 1 : 0)));
      byte(0xc7);
      modrmReg(0, R);
      return u32(uint32_t(V));
    }
    movAbs(R, V);
  }
  /// MOV r64, imm64 (REX.W B8+r), always 10 bytes.
  void movAbs(Reg R, uint64_t V) {
    byte(uint8_t(0x48 | (R >= 8 ? 1 : 0)));
    byte(uint8_t(0xb8 + (R & 7)));
    u64(V);
  }
  /// ALU Dst, Src (registers).
  void aluRR(Alu Op, unsigned Size, Reg Dst, Reg Src) {
    const uint8_t Base = uint8_t(unsigned(Op) * 8);
    opReg(Size, Base, uint8_t(Base + 1), Src, Dst);
  }
  void testRR(unsigned Size, Reg A, Reg B) { opReg(Size, 0x84, 0x85, B, A); }
  /// ALU r64/r32, imm32 (group 1, 81 /digit; sign-extended for 64-bit), or imm8 (83
  /// /digit, sign-extended to the operand size) when that is the same value.
  void aluImm(Alu Op, unsigned Size, Reg R, uint32_t Imm) {
    prefix(Size, 0, R);
    const bool Short = fitsInt8(int32_t(Imm));
    byte(Short ? 0x83 : 0x81);
    modrmReg(unsigned(Op), R);
    immOf(Short, Imm);
  }
  void immOf(bool Short, uint32_t Imm) {
    if (Short)
      byte(uint8_t(Imm));
    else
      u32(Imm);
  }
  /// ADD qword [RBX + Disp], imm32 (or imm8).
  void addMem64Imm(int32_t Disp, int32_t Imm) {
    prefix(8, 0, HBX);
    const bool Short = fitsInt8(Imm);
    byte(Short ? 0x83 : 0x81);
    modrmMem(0, Disp);
    immOf(Short, uint32_t(Imm));
  }
  void cmpRegMem64(Reg R, int32_t Disp) { opMem(8, 0x3a, 0x3b, R, Disp); }
  /// Group 3 (F6/F7): NOT /2, NEG /3; group 4/5 (FE/FF): INC /0, DEC /1.
  void group3(unsigned Digit, unsigned Size, Reg R) { opReg(Size, 0xf6, 0xf7, Digit, R); }
  void group45(unsigned Digit, unsigned Size, Reg R) { opReg(Size, 0xfe, 0xff, Digit, R); }
  void shiftImm(Shift Op, unsigned Size, Reg R, uint8_t Count) {
    opReg(Size, 0xc0, 0xc1, unsigned(Op), R);
    byte(Count);
  }
  /// BT r32, imm8 (0F BA /4).
  void btImm(Reg R, uint8_t Bit) { bt(4, R, false, 0, Bit); }
  /// BT qword [RBX + Disp], imm8.
  void btMem64(int32_t Disp, uint8_t Bit) { bt(8, HBX, true, Disp, Bit); }
  void bt(unsigned Size, Reg Rm, bool Mem, int32_t Disp, uint8_t Bit) {
    prefix(Size, 0, Rm);
    byte(0x0f);
    byte(0xba);
    if (Mem)
      modrmMem(4, Disp);
    else
      modrmReg(4, Rm);
    byte(Bit);
  }
  /// LEA Dst, [Base + Disp] (64-bit); a MOV when Disp is 0.
  void leaDisp32(Reg Dst, Reg Base, int32_t Disp) {
    if (Disp == 0)
      return movRR(8, Dst, Base);
    prefix(8, Dst, Base);
    byte(0x8d);
    modrmDisp(Dst, Base, Disp);
  }
  /// LEA Dst, [Base + Index << ScaleLog2 + Disp] (64-bit; Index is not RSP).
  void leaSib(Reg Dst, Reg Base, Reg Index, uint8_t ScaleLog2, int32_t Disp) {
    byte(uint8_t(0x48 | ((Dst >> 3) & 1) << 2 | ((Index >> 3) & 1) << 1 | ((Base >> 3) & 1)));
    byte(0x8d);
    const uint8_t Mod = Disp == 0 && (Base & 7) != HBP ? 0x00 : fitsInt8(Disp) ? 0x40 : 0x80;
    byte(uint8_t(Mod | (Dst & 7) << 3 | 4));
    byte(uint8_t(ScaleLog2 << 6 | (Index & 7) << 3 | (Base & 7)));
    dispOf(Mod, Disp);
  }
  /// LEA R, [R12 + Disp] (R12 holds the block's entry RIP).
  void leaR12(Reg R, int32_t Disp) { leaDisp32(R, H12, Disp); }
  /// Op R, [Base + Disp8] with a Size-byte operand, 64 by default.
  void opAt(uint8_t Op, unsigned R, Reg Base, int8_t Disp, unsigned Size = 8) {
    prefix(Size, R, Base);
    byte(Op);
    modrmDisp(R, Base, Disp);
  }
  /// CMP byte [Base + Disp8], Imm8 (80 /7 ib).
  void cmpByteAt(Reg Base, int8_t Disp, uint8_t Imm) {
    opAt(0x80, 7, Base, Disp, 1);
    byte(Imm);
  }
  void loadAt(Reg R, Reg Base, int8_t Disp) { opAt(0x8b, R, Base, Disp); }
  void storeAt(Reg R, Reg Base, int8_t Disp) { opAt(0x89, R, Base, Disp); }
  void cmpRegAt(Reg R, Reg Base, int8_t Disp) { opAt(0x3b, R, Base, Disp); }
  void addRegAt(Reg R, Reg Base, int8_t Disp) { opAt(0x03, R, Base, Disp); }
  /// MOV [R13 + Disp8], R (R13 holds the translator's chain state).
  void storeR13(int8_t Disp, Reg R) { storeAt(R, H13, Disp); }
  /// INC qword [R13 + Disp8] (FF /0).
  void incR13(int8_t Disp) { opAt(0xff, 0, H13, Disp); }
  /// JMP qword [Base + Disp8] (FF /4).
  void jumpAt(Reg Base, int8_t Disp) {
    if (Base >= 8)
      byte(0x41);
    byte(0xff);
    modrmDisp(4, Base, Disp);
  }
  /// LEA R32, [R + R*2] (R < 8).
  void timesThree(Reg R) {
    byte(0x8d);
    byte(uint8_t(0x04 | (R & 7) << 3));
    byte(uint8_t(0x40 | (R & 7) << 3 | (R & 7)));
  }
  /// Op R, qword [RBX + Index + Disp] (the Cpu's Disp, biased) with a 64-bit operand
  /// (R, Index < 8): CMP (3B), ADD (03), MOV (8B).
  void opBaseIndex(uint8_t Op, Reg R, Reg Index, int32_t Disp) {
    byte(0x48);
    byte(Op);
    const int32_t D = Disp - kCpuBias;
    const uint8_t Mod = fitsInt8(D) ? 0x40 : 0x80;
    byte(uint8_t(Mod | 0x04 | (R & 7) << 3));
    byte(uint8_t((Index & 7) << 3 | HBX)); // scale 1
    dispOf(Mod, D);
  }
  /// MOV R, qword [Base + Index*8] (R, Base, Index < 8; Base not RSP/RBP).
  void loadIndexed8(Reg R, Reg Base, Reg Index) {
    byte(0x48);
    byte(0x8b);
    byte(uint8_t(0x04 | (R & 7) << 3));
    byte(uint8_t(0xc0 | (Index & 7) << 3 | (Base & 7)));
  }
  /// ADD R, qword [RBX + Disp].
  void addRegMem64(Reg R, int32_t Disp) { opMem(8, 0x02, 0x03, R, Disp); }
  /// XOR R64, qword [RBX + Disp] and XOR qword [RBX + Disp], R64.
  void xorRegMem64(Reg R, int32_t Disp) { opMem(8, 0x32, 0x33, R, Disp); }
  void xorMemReg64(int32_t Disp, Reg R) { opMem(8, 0x30, 0x31, R, Disp); }
  /// MOV R, [RAX] and MOV [RAX], R of Size bytes (R < 8, not SPL..DIL: no REX needed).
  void loadAtRax(unsigned Size, Reg R) { atRax(Size, 0x8a, 0x8b, R); }
  void storeAtRax(unsigned Size, Reg R) { atRax(Size, 0x88, 0x89, R); }
  void atRax(unsigned Size, uint8_t Op8, uint8_t Op, Reg R) {
    prefix(Size, R, HAX);
    byte(Size == 1 ? Op8 : Op);
    byte(uint8_t((R & 7) << 3)); // mod 00, r/m RAX
  }
  /// MOVZX r32, byte|word [RAX] (Size 1, 2), MOV r32|r64, [RAX] (4, 8) (R < 8).
  void loadZxAtRax(unsigned Size, Reg R) {
    if (Size >= 4)
      return loadAtRax(Size, R);
    extendOpcode(false, Size);
    byte(uint8_t((R & 7) << 3));
  }
  /// MOVSX r64, byte|word [RAX], MOVSXD r64, [RAX], MOV r64, [RAX] (R < 8).
  void loadSxAtRax(unsigned Size, Reg R) {
    if (Size == 8)
      return loadAtRax(8, R);
    byte(0x48);
    extendOpcode(true, Size);
    byte(uint8_t((R & 7) << 3));
  }
  /// IMUL Dst, Src (0F AF /r), 16/32/64-bit.
  void imulRR(unsigned Size, Reg Dst, Reg Src) {
    prefix(Size, Dst, Src);
    byte(0x0f);
    byte(0xaf);
    modrmReg(Dst, Src);
  }
  /// SETcc r8 (0F 90+cc; R < 4: AL..BL, no REX).
  void setcc(int Cc, Reg R) {
    byte(0x0f);
    byte(uint8_t(0x90 + Cc));
    modrmReg(0, R);
  }
  /// CMOVcc Dst, Src (0F 40+cc /r), 16/32/64-bit.
  void cmov(int Cc, unsigned Size, Reg Dst, Reg Src) {
    prefix(Size, Dst, Src);
    byte(0x0f);
    byte(uint8_t(0x40 + Cc));
    modrmReg(Dst, Src);
  }
  void pushfq() { byte(0x9c); }
  void push(Reg R) {
    if (R >= 8)
      byte(0x41);
    byte(uint8_t(0x50 + (R & 7)));
  }
  void pop(Reg R) {
    if (R >= 8)
      byte(0x41);
    byte(uint8_t(0x58 + (R & 7)));
  }
  void callRax() {
    byte(0xff);
    byte(0xd0);
  }
  void ret() { byte(0xc3); }
  /// Where Buf[0] will run (the code is copied there as it is): the origin of CALL rel32.
  void setOrigin(uint64_t At) { Origin = At; }
  /// CALL rel32 to Target (within 2 GiB of the origin).
  void callAbs(uint64_t Target) {
    byte(0xe8);
    u32(uint32_t(Target - (Origin + Len + 4)));
  }

  // --- branches to labels (forward or backward, rel32) ---
  static constexpr unsigned kMaxFixups = 512;
  /// Jcc (Cc = the host condition code 0..15) or JMP (Cc = -1) to Label; bound later.
  void jump(int Cc, unsigned Label) {
    if (Cc < 0) {
      byte(0xe9);
    } else {
      byte(0x0f);
      byte(uint8_t(0x80 + Cc));
    }
    if (NumFixups < kMaxFixups)
      Fixups[NumFixups++] = Fixup{uint32_t(Len), Label};
    else
      Overflow = true;
    u32(0);
  }
  void bind(unsigned Label) {
    if (Label < kMaxLabels)
      Labels[Label] = uint32_t(Len);
    LastBind = Len;
  }
  /// Where the last label was bound (code there may be reached by a jump).
  size_t lastBind() const { return LastBind; }
  static constexpr unsigned kMaxLabels = 256;
  /// Patches every jump; false when one names an unbound label.
  bool resolve() {
    for (unsigned K = 0; K < NumFixups; ++K) {
      const Fixup &F = Fixups[K];
      if (F.Label >= kMaxLabels || Labels[F.Label] == kUnbound || F.At + 4 > Len)
        return false;
      const int32_t Rel = int32_t(Labels[F.Label]) - int32_t(F.At + 4);
      std::memcpy(Buf + F.At, &Rel, 4);
    }
    return true;
  }
  void resetLabels() {
    for (uint32_t &L : Labels)
      L = kUnbound;
    NumFixups = 0;
    LastBind = ~size_t(0);
  }

private:
  static constexpr uint32_t kUnbound = ~uint32_t(0);
  struct Fixup {
    uint32_t At;
    unsigned Label;
  };
  uint8_t *Buf;
  size_t Cap;
  size_t Len = 0;
  size_t LastBind = ~size_t(0);
  uint64_t Origin = 0;
  bool Overflow = false;
  Fixup Fixups[kMaxFixups];
  unsigned NumFixups = 0;
  uint32_t Labels[kMaxLabels];
};

} // namespace vmxsim::x64
