// A small writer of ACPI Machine Language (ACPI Specification 6.5, "ACPI Machine Language
// (AML) Specification"): just the terms the DSDT of harness/acpi_tables.cpp uses, so the
// table is generated in C++ at machine build time with no ASL compiler. Each term's
// encoding cites its grammar rule; the result is checked by disassembling it with iasl
// (tests/harness/firmware_test.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace vmxsim::aml {

/// ACPI 6.5, "Package Length Encoding": PkgLength for a body of BodyBytes bytes; the
/// encoded length counts its own bytes too. Bodies are at most 2^28 - 5 bytes.
std::vector<uint8_t> pkgLength(uint64_t BodyBytes);

/// The 32-bit compressed EISA ID of a seven-character PNP ID such as "PNP0A03" ("EISAID"
/// in ASL: three letters of five bits, four hex digits, stored big-endian).
uint32_t eisaId(std::string_view Id);

/// Small resource data items of a ResourceTemplate (ACPI 6.5, "Resource Data Types for
/// ACPI"); call end() last.
class Resources {
public:
  /// "I/O Port Descriptor" (16-bit decode), Min = Max: a fixed range.
  Resources &io(uint16_t Base, uint8_t Length, uint8_t Align = 1);
  /// "IRQ Descriptor" without the information byte: active-high, edge-triggered ISA IRQ.
  Resources &irq(unsigned Irq);
  /// "32-Bit Fixed Memory Range Descriptor".
  Resources &memory32Fixed(uint32_t Base, uint32_t Length, bool Writable);
  /// "Word Address Space Descriptor" for a bus-number range a bridge produces.
  Resources &wordBusNumber(uint16_t Min, uint16_t Max);
  /// "Word Address Space Descriptor" for an I/O window a bridge produces.
  Resources &wordIo(uint16_t Min, uint16_t Max);
  /// "DWord Address Space Descriptor" for a memory window a bridge produces (read-write,
  /// non-cacheable).
  Resources &dwordMemory(uint32_t Min, uint32_t Max);
  /// "End Tag" (checksum 0: "treated as if the checksum operation succeeded").
  std::vector<uint8_t> end();

private:
  /// A Word Address Space Descriptor of resource type Type (1 I/O, 2 bus number).
  Resources &wordAddressSpace(uint8_t Type, uint8_t TypeFlags, uint16_t Min, uint16_t Max);
  std::vector<uint8_t> B;
};

/// Builds a term list. Names are AML NameStrings in ASL spelling: "\\_SB", "PCI0",
/// "\\_SB.PCI0", "_HID" (segments of up to four characters, padded with '_').
class Builder {
public:
  using Body = std::function<void(Builder &)>;
  /// DefScope := ScopeOp PkgLength NameString TermList
  Builder &scope(std::string_view Name, const Body &Terms);
  /// DefDevice := DeviceOp PkgLength NameString TermList
  Builder &device(std::string_view Name, const Body &Terms);
  /// DefName := NameOp NameString DataRefObject, with an integer (the shortest encoding:
  /// ZeroOp, OneOp, BytePrefix, WordPrefix, DWordPrefix or QWordPrefix).
  Builder &nameInteger(std::string_view Name, uint64_t Value);
  /// ... with a String (StringPrefix AsciiCharList NullChar).
  Builder &nameString(std::string_view Name, std::string_view Value);
  /// ... with an EISA ID (an integer, see eisaId).
  Builder &nameEisaId(std::string_view Name, std::string_view Id);
  /// ... with a Buffer (DefBuffer := BufferOp PkgLength BufferSize ByteList).
  Builder &nameBuffer(std::string_view Name, const std::vector<uint8_t> &Bytes);
  /// ... with a Package of integers (DefPackage := PackageOp PkgLength NumElements
  /// PackageElementList).
  Builder &namePackage(std::string_view Name, const std::vector<uint64_t> &Elements);

  const std::vector<uint8_t> &bytes() const { return Out; }

private:
  void nameStringBytes(std::string_view Name);
  void integer(uint64_t V);
  void wrapped(std::initializer_list<uint8_t> Op, std::string_view Name, const Body &Terms);
  std::vector<uint8_t> Out;
};

} // namespace vmxsim::aml
