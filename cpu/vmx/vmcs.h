// The VMCS (SDM Vol. 3C, "Virtual Machine Control Structures"): field metadata generated
// from vmcs_fields.def, the processor's cached copy of the current VMCS, and the layout
// of VMCS data in the guest's VMCS region.
#pragma once
#include "cpu/vmx/vmx_features.h"

#include <array>
#include <cstdint>

namespace vmxsim {

/// Encoding bits 14:13 (SDM Vol. 3C, "VMREAD, VMWRITE, and Encodings of VMCS Fields").
enum class VmcsWidth : uint8_t { W16 = 0, W64 = 1, W32 = 2, Natural = 3 };
/// Encoding bits 11:10.
enum class VmcsType : uint8_t { Control = 0, ExitInfo = 1, Guest = 2, Host = 3 };

enum class VmcsField : uint16_t {
#define VMCS_FIELD(Name, Encoding, Width, Type, Feature, SdmName) Name,
#include "cpu/vmx/vmcs_fields.def"
#undef VMCS_FIELD
};
inline constexpr unsigned kNumVmcsFields = 0
#define VMCS_FIELD(Name, Encoding, Width, Type, Feature, SdmName) +1
#include "cpu/vmx/vmcs_fields.def"
#undef VMCS_FIELD
    ;

struct VmcsFieldInfo {
  uint32_t Encoding;
  VmcsWidth Width;
  VmcsType Type;
  VmxFeature Feature;
  const char *Name;    ///< the C++ enumerator name
  const char *SdmName; ///< the SDM's name, for printing
};

inline constexpr std::array<VmcsFieldInfo, kNumVmcsFields> kVmcsFields = {{
#define VMCS_FIELD(Name, Encoding, Width, Type, Feature, SdmName)                         \
  {Encoding, VmcsWidth::Width, VmcsType::Type, VmxFeature::Feature, #Name, SdmName},
#include "cpu/vmx/vmcs_fields.def"
#undef VMCS_FIELD
}};

inline constexpr const VmcsFieldInfo &fieldInfo(VmcsField F) {
  return kVmcsFields[unsigned(F)];
}
inline constexpr uint32_t encodingOf(VmcsField F) { return fieldInfo(F).Encoding; }

namespace detail {
constexpr bool tableIsConsistent() {
  for (unsigned I = 0; I < kNumVmcsFields; ++I) {
    const VmcsFieldInfo &F = kVmcsFields[I];
    // Width and type bits of the encoding agree with the declared columns; the "access
    // type" bit 0 is 0 (full) in every listed encoding; bits above 14 and bit 12 are 0.
    if (((F.Encoding >> 13) & 3) != unsigned(F.Width) ||
        ((F.Encoding >> 10) & 3) != unsigned(F.Type) || (F.Encoding & 1) ||
        (F.Encoding & ~uint32_t(0x6fff)))
      return false;
    for (unsigned J = I + 1; J < kNumVmcsFields; ++J)
      if (kVmcsFields[J].Encoding == F.Encoding)
        return false;
  }
  return true;
}
} // namespace detail
static_assert(detail::tableIsConsistent(),
              "vmcs_fields.def: an encoding disagrees with its width/type, is odd, or is "
              "listed twice");

/// Result of decoding a VMREAD/VMWRITE field encoding.
struct VmcsLookup {
  bool Found = false;
  VmcsField Field{};
  bool High = false; ///< the "high" access of a 64-bit field (bits 63:32)
};
/// Encoding -> field, for the 15-bit encoding space with the access-type bit cleared,
/// computed at compile time from the table (vmcs.cpp); 0xffff marks "no such field".
struct VmcsEncodingIndex {
  uint16_t FieldOf[0x8000 / 2];
};
extern const VmcsEncodingIndex kVmcsEncodingIndex;

/// The index of the field an encoding names, ignoring the access-type bit 0, or 0xffff.
/// Bits 63:15 must be zero (SDM Vol. 3C, "VMREAD, VMWRITE, and Encodings of VMCS
/// Fields": bits 31:15 are reserved; in 64-bit mode the register is 64 bits and any bit
/// above 31 set also names no field). Inline, as lookupEncoding: VMREAD and VMWRITE of a
/// register operand find their field here on the handler's path (issue 17).
inline uint16_t fieldIndexOfEncoding(uint64_t Encoding) {
  return Encoding >> 15 ? uint16_t(0xffff) : kVmcsEncodingIndex.FieldOf[Encoding >> 1];
}
/// Maps an encoding (any 32-bit value from a register) to a field; not Found for
/// encodings that name no field in the table, for bits 31:15 set, for a high access to a
/// non-64-bit field, or for reserved bit 12.
inline VmcsLookup lookupEncoding(uint64_t Encoding) {
  VmcsLookup L;
  const uint16_t Idx = fieldIndexOfEncoding(Encoding);
  if (Idx == 0xffff)
    return L;
  const bool High = Encoding & 1;
  if (High && kVmcsFields[Idx].Width != VmcsWidth::W64)
    return L;
  L.Found = true;
  L.Field = VmcsField(Idx);
  L.High = High;
  return L;
}

/// VMCS revision identifier reported in IA32_VMX_BASIC[30:0].
inline constexpr uint32_t kVmcsRevisionId = 0x000000e1;

/// vmxsim's layout of the VMCS region (4 KiB): the revision identifier and VMX-abort
/// indicator sit at the architected offsets 0 and 4 (SDM Vol. 3C, "Format of the VMCS
/// Region"); the rest is implementation-specific: the launch state at 8 and one 8-byte
/// slot per field, in table order, from 16.
namespace vmcs_layout {
inline constexpr uint64_t RevisionOffset = 0;
inline constexpr uint64_t AbortOffset = 4;
inline constexpr uint64_t LaunchStateOffset = 8;
inline constexpr uint64_t FieldsOffset = 16;
inline constexpr uint64_t fieldOffset(VmcsField F) { return FieldsOffset + 8 * unsigned(F); }
} // namespace vmcs_layout
static_assert(vmcs_layout::FieldsOffset + 8 * kNumVmcsFields <= 4096,
              "the VMCS data must fit in its 4 KiB region");

/// The processor's cached copy of a VMCS's data (SDM Vol. 3C, "VMCS data ... may be
/// cached on the processor"). Values are stored zero-extended to 64 bits, one slot per
/// row of vmcs_fields.def (a fixed array indexed by VmcsField: no lookup on any path).
///
/// Written is the VM-entry fast path's change set (cpu/vmx/vm_entry_checks.h,
/// VmEntryCheckMemo): bit I set means field I may have changed since VM entry last
/// looked. set() marks a field whose value changes; a copy marks every field (the memo
/// cannot know what the copied-over data was). Code that stores into Values directly
/// must call markAllWritten() (as VMPTRLD does) or mark the fields it changed.
struct VmcsData {
  static constexpr unsigned kWrittenWords = (kNumVmcsFields + 63) / 64;
  std::array<uint64_t, kNumVmcsFields> Values{};
  uint64_t Written[kWrittenWords];

  VmcsData() { markAllWritten(); }
  VmcsData(const VmcsData &O) : Values(O.Values) { markAllWritten(); }
  VmcsData &operator=(const VmcsData &O) {
    Values = O.Values;
    markAllWritten();
    return *this;
  }

  uint64_t get(VmcsField F) const { return Values[unsigned(F)]; }
  void set(VmcsField F, uint64_t V) { store(unsigned(F), truncateToWidth(F, V)); }
  /// Stores an already-truncated value into slot I and marks it if it changed.
  void store(unsigned I, uint64_t V) {
    if (Values[I] != V) {
      Values[I] = V;
      Written[I / 64] |= uint64_t(1) << (I % 64);
    }
  }
  /// Marks every field, and no bit past the last one (the memo indexes per-field tables
  /// with the marked bits).
  void markAllWritten() {
    for (unsigned W = 0; W < kWrittenWords; ++W) {
      const unsigned Bits = kNumVmcsFields - 64 * W;
      Written[W] = Bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << Bits) - 1;
    }
  }
  static uint64_t truncateToWidth(VmcsField F, uint64_t V) {
    switch (fieldInfo(F).Width) {
    case VmcsWidth::W16:
      return uint16_t(V);
    case VmcsWidth::W32:
      return uint32_t(V);
    default:
      return V;
    }
  }
};

/// Whether a field exists on a processor with the given profile (VMREAD/VMWRITE of a
/// field that does not exist fail with error 12).
inline bool fieldSupported(const VmxProfile &P, VmcsField F) {
  return P.has(fieldInfo(F).Feature);
}

/// The value a VMREAD of the field returns from its stored value (SDM Vol. 3C, VMREAD:
/// the high access of a 64-bit field reads bits 63:32).
inline uint64_t vmcsReadValue(uint64_t Stored, const VmcsLookup &L) {
  return L.High ? Stored >> 32 : Stored;
}
inline uint64_t vmcsReadValue(const VmcsData &D, const VmcsLookup &L) {
  return vmcsReadValue(D.get(L.Field), L);
}
/// The stored value after a VMWRITE of V to a field holding Stored (SDM Vol. 3C, VMWRITE:
/// a high access writes bits 63:32 and leaves 31:0; other accesses truncate to the field
/// width).
inline uint64_t vmcsWrittenValue(uint64_t Stored, const VmcsLookup &L, uint64_t V) {
  if (L.High)
    return (Stored & 0xffffffffull) | (uint64_t(uint32_t(V)) << 32);
  return VmcsData::truncateToWidth(L.Field, V);
}
inline void vmcsWriteValue(VmcsData &D, const VmcsLookup &L, uint64_t V) {
  D.store(unsigned(L.Field), vmcsWrittenValue(D.get(L.Field), L, V));
}

enum class VmInstructionError : uint8_t {
#define VM_INSTRUCTION_ERROR(Name, Number, Desc) Name = Number,
#include "cpu/vmx/vm_instruction_errors.def"
#undef VM_INSTRUCTION_ERROR
};
const char *vmInstructionErrorText(unsigned Number);

} // namespace vmxsim
