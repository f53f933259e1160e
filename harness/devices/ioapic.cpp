#include "harness/devices/ioapic.h"

namespace vmxsim {

namespace {
// Writable bits of a redirection entry (82093AA data sheet, "I/O Redirection Table
// Registers"): vector, delivery mode, destination mode, polarity, trigger, mask; the
// destination field.
constexpr uint64_t kRedirWritable = 0xff000000'0001afffull;
} // namespace

void IoApic::reset() {
  Sel = IdReg = 0;
  for (uint64_t &R : Redir)
    R = kMasked;
  PinLevel = 0;
}

uint32_t IoApic::readReg(uint32_t Index) const {
  switch (Index) {
  case IdIdx:
  case ArbIdx:
    return IdReg;
  case VersionIdx:
    return kVersion;
  default:
    break;
  }
  if (Index >= RedirIdx && Index < RedirIdx + 2 * kPins) {
    const uint64_t R = Redir[(Index - RedirIdx) / 2];
    return (Index & 1) ? uint32_t(R >> 32) : uint32_t(R);
  }
  return 0; // unimplemented register index
}

void IoApic::writeReg(uint32_t Index, uint32_t Value) {
  if (Index == IdIdx) {
    IdReg = Value & 0x0f000000;
    return;
  }
  if (Index < RedirIdx || Index >= RedirIdx + 2 * kPins)
    return; // version, arbitration ID and unknown indexes are read-only
  const unsigned Pin = (Index - RedirIdx) / 2;
  uint64_t &R = Redir[Pin];
  const uint64_t Half = (Index & 1) ? uint64_t(Value) << 32 : uint64_t(Value);
  const uint64_t HalfMask = (Index & 1) ? 0xffffffff'00000000ull : 0xffffffffull;
  R = (R & ~(HalfMask & kRedirWritable)) | (Half & HalfMask & kRedirWritable);
  if (!(R & kLevel))
    R &= ~kRemoteIrr; // remote IRR is undefined for edge entries; keep it clear
  service(Pin);      // an unmasked, asserted level entry sends now
}

void IoApic::setPin(unsigned Pin, bool Level) {
  if (Pin >= kPins)
    return;
  const bool Was = asserted(Pin);
  PinLevel = Level ? PinLevel | (1u << Pin) : PinLevel & ~(1u << Pin);
  const bool Is = asserted(Pin);
  if (Redir[Pin] & kLevel)
    service(Pin);
  else if (Is && !Was && !(Redir[Pin] & kMasked))
    send(Pin); // edge-triggered: one message per assertion edge
}

void IoApic::service(unsigned Pin) {
  const uint64_t R = Redir[Pin];
  if ((R & kLevel) && !(R & kMasked) && !(R & kRemoteIrr) && asserted(Pin))
    send(Pin);
}

void IoApic::send(unsigned Pin) {
  uint64_t &R = Redir[Pin];
  // 110b, START-UP in the ICR, is reserved in a redirection entry (82093AA data sheet):
  // it travels as the other reserved code, 011b, which the local APIC refuses.
  const unsigned ModeBits = unsigned(R >> 8) & 7;
  const auto Mode = LocalApic::Delivery(ModeBits == 6 ? 3 : ModeBits);
  const uint8_t Vector = uint8_t(R);
  const bool Logical = R & (1u << 11);
  const bool Level = R & kLevel;
  const uint8_t Dest = uint8_t(R >> 56);
  // Every mode goes to the local APICs: fixed, lowest priority, NMI, INIT, ExtINT (the
  // processor's INTA then reads the 8259: virtual-wire mode) and, for the APIC to stop the
  // run naming it, SMI and the reserved 011b and 110b.
  const bool Fixedish =
      Mode == LocalApic::Delivery::Fixed || Mode == LocalApic::Delivery::LowestPriority;
  // NMI and INIT are edge messages; only fixed/lowest-priority level entries wait for EOI.
  if (Level && Fixedish)
    R |= kRemoteIrr;
  const uint64_t T = Now ? Now() : 0;
  auto deliver = [&](LocalApic *A) {
    A->accept(Mode, Vector, Level && Fixedish);
    if (A->C.waiting())
      A->C.waitUntil(T);
    A->C.breakBlock();
  };
  LocalApic *Lowest = nullptr;
  for (LocalApic *A : Bus.Apics) {
    if (!A->hardwareEnabled() || !ApicBus::matches(*A, Dest, Logical))
      continue;
    if (Mode == LocalApic::Delivery::LowestPriority) {
      if (!Lowest || (A->readReg(LocalApic::Tpr) & 0xf0) < (Lowest->readReg(LocalApic::Tpr) & 0xf0))
        Lowest = A;
      continue;
    }
    deliver(A);
  }
  if (Lowest)
    deliver(Lowest);
}

void IoApic::levelEoi(uint8_t Vector) {
  for (unsigned Pin = 0; Pin < kPins; ++Pin) {
    uint64_t &R = Redir[Pin];
    if ((R & kRemoteIrr) && uint8_t(R) == Vector) {
      R &= ~kRemoteIrr;
      service(Pin); // still asserted: the next message goes out
    }
  }
}

uint64_t IoApic::mmioRead(uint64_t Offset, unsigned SizeBytes) {
  // Registers are 32-bit at the start of their offset; wider reads see zeros above.
  uint64_t V = 0;
  if (Offset == RegSel)
    V = Sel;
  else if (Offset == Window)
    V = readReg(Sel);
  return SizeBytes >= 8 ? V : V & ((uint64_t(1) << (8 * SizeBytes)) - 1);
}

void IoApic::mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) {
  if (SizeBytes < 4 && Offset != RegSel)
    return; // IOWIN and EOI take 32-bit stores; narrower ones are ignored
  switch (Offset) {
  case RegSel:
    Sel = uint8_t(Value); // bits 7:0 select the register
    return;
  case Window:
    writeReg(Sel, uint32_t(Value));
    return;
  case EoiReg:
    levelEoi(uint8_t(Value));
    return;
  default:
    return;
  }
}

} // namespace vmxsim
