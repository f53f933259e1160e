// The event table of trace/events.def as C++ data: names, word counts, TSC rules and
// payload layouts for the writer, the reader's checks and `vmxsim trace dump`.
#pragma once
#include "trace/xentrace.h"

#include <cstdint>
#include <string_view>

namespace vmxsim::trace {

/// Every event id of events.def, e.g. Event::VmxExit64.
enum class Event : uint32_t {
#define TRACE_EVENT(Name, Class, Subclass, Number, Tsc, MinWords, MaxWords, Str, Layout) \
  Name = XT_EV_##Name,
#include "trace/events.def"
};

enum class TscRule : uint8_t { Always = XT_TSC_Always, Never = XT_TSC_Never, Optional = XT_TSC_Optional };

struct EventInfo {
  uint32_t Id;
  const char *Name; ///< as printed, e.g. "VMX_EXIT64"
  TscRule Tsc;
  uint8_t MinWords, MaxWords;
  const char *Layout; ///< see the comment at the top of events.def
};

inline constexpr EventInfo kEvents[] = {
#define TRACE_EVENT(Name, Class, Subclass, Number, Tsc, MinWords, MaxWords, Str, Layout) \
  {XT_EV_##Name, Str, TscRule::Tsc, MinWords, MaxWords, Layout},
#include "trace/events.def"
};
inline constexpr unsigned kNumEvents = sizeof(kEvents) / sizeof(kEvents[0]);

/// The table row of an id (bits 0-27), or nullptr for an id events.def does not list.
const EventInfo *findEvent(uint32_t Id);

/// Field kinds of a payload layout.
enum class FieldKind : uint8_t { Hex, Dec, Signed, Hex64, Dec64, DomVcpu, VcpuDom, Reason, Check };

/// One field of a layout: its name and kind; Words is 1 or 2.
struct Field {
  std::string_view Name;
  FieldKind Kind = FieldKind::Hex;
  unsigned Words = 1;
};

/// Parses the field at Pos of a layout string and advances Pos past it; false at the end
/// of the layout or on a malformed field (which the static_asserts below rule out).
constexpr bool nextField(std::string_view Layout, size_t &Pos, Field &F) {
  while (Pos < Layout.size() && Layout[Pos] == ' ')
    ++Pos;
  if (Pos >= Layout.size())
    return false;
  size_t End = Layout.find(' ', Pos);
  if (End == std::string_view::npos)
    End = Layout.size();
  std::string_view Tok = Layout.substr(Pos, End - Pos);
  Pos = End;
  size_t Colon = Tok.find(':');
  F.Name = Tok.substr(0, Colon);
  std::string_view Kind = Colon == std::string_view::npos ? "" : Tok.substr(Colon + 1);
  struct {
    std::string_view Spelling;
    FieldKind Kind;
    unsigned Words;
  } const Kinds[] = {{"", FieldKind::Hex, 1},         {"d", FieldKind::Dec, 1},
                     {"s", FieldKind::Signed, 1},     {"x64", FieldKind::Hex64, 2},
                     {"d64", FieldKind::Dec64, 2},    {"dv", FieldKind::DomVcpu, 1},
                     {"vd", FieldKind::VcpuDom, 1},   {"reason", FieldKind::Reason, 1},
                     {"check", FieldKind::Check, 1}};
  for (const auto &K : Kinds)
    if (K.Spelling == Kind) {
      F.Kind = K.Kind;
      F.Words = K.Words;
      return !F.Name.empty();
    }
  return false;
}

/// Number of payload words a layout describes, or -1 if it is malformed.
constexpr int layoutWords(std::string_view Layout) {
  size_t Pos = 0;
  int Words = 0;
  Field F;
  while (nextField(Layout, Pos, F))
    Words += int(F.Words);
  // A malformed field stops nextField before the end.
  while (Pos < Layout.size() && Layout[Pos] == ' ')
    ++Pos;
  return Pos == Layout.size() ? Words : -1;
}

/// Compile-time checks of events.def (STYLE 2.1): word bounds, layouts that cover
/// exactly MaxWords (WRAP_BUFFER has no layout: its words mean nothing), ids within 28
/// bits, each id listed once.
constexpr bool eventTableValid() {
  for (unsigned I = 0; I < kNumEvents; ++I) {
    const EventInfo &E = kEvents[I];
    if (E.MinWords > E.MaxWords || E.MaxWords > XT_MAX_WORDS || (E.Id & ~XT_EVENT_MASK))
      return false;
    int W = layoutWords(E.Layout);
    if (W < 0 || (W != E.MaxWords && E.Id != XT_EV_WrapBuffer))
      return false;
    for (unsigned J = 0; J < I; ++J)
      if (kEvents[J].Id == E.Id)
        return false;
  }
  return true;
}
static_assert(eventTableValid(), "trace/events.def: bad word counts, layout or duplicate id");
static_assert(XT_EV_TraceCpuChange == 0x0001f003 && XT_EV_VmxExit64 == 0x00081102 &&
                  XT_EV_Cpuid == 0x0008200e && XT_EV_IoportWrite == 0x00082216 &&
                  XT_EV_RunstateRunnableToRunning == 0x00021101,
              "ids of the format doc's worked example");

/// A row of the xen-3.0 table of events.def (TRACE_XEN30_EVENT).
struct Xen30EventInfo {
  uint32_t Id;
  const char *Name;   ///< as printed, e.g. "VMX_VMENTRY"
  const char *Layout; ///< five one-item fields
};

inline constexpr Xen30EventInfo kXen30Events[] = {
#define TRACE_XEN30_EVENT(Name, Class, Subclass, Number, Str, Layout) {XT30_EV_##Name, Str, Layout},
#include "trace/events.def"
};
inline constexpr unsigned kNumXen30Events = sizeof(kXen30Events) / sizeof(kXen30Events[0]);

/// The xen-3.0 row of an id, or nullptr.
const Xen30EventInfo *findXen30Event(uint32_t Id);

/// The xen-3.0 table: one field per 64-bit item (no two-word kinds), five in all; ids
/// within 28 bits and listed once.
constexpr bool xen30TableValid() {
  for (unsigned I = 0; I < kNumXen30Events; ++I) {
    const Xen30EventInfo &E = kXen30Events[I];
    if (E.Id & ~XT_EVENT_MASK)
      return false;
    std::string_view L = E.Layout;
    size_t Pos = 0;
    unsigned N = 0;
    Field F;
    while (nextField(L, Pos, F)) {
      if (F.Words != 1 || F.Kind == FieldKind::DomVcpu || F.Kind == FieldKind::VcpuDom)
        return false;
      ++N;
    }
    if (N != XT30_ITEMS || layoutWords(L) != int(XT30_ITEMS))
      return false;
    for (unsigned J = 0; J < I; ++J)
      if (kXen30Events[J].Id == E.Id)
        return false;
  }
  return true;
}
static_assert(xen30TableValid(), "trace/events.def: bad xen-3.0 row");
static_assert(XT30_EV_VmxVmexit == 0x00081001 && XT30_EV_VmxVmentry == 0x00081002 &&
                  XT30_EV_LostRecords == 0x0001f001,
              "Xen 3.0.3's TRC_VMX_VMEXIT, TRC_VMX_VMENTRY, TRC_LOST_RECORDS");
static_assert(XT30_RECORD_BYTES == 8 + 4 + 4 + 8 * XT30_ITEMS,
              "struct t_rec of a 64-bit hypervisor");

/// The class field (id bits 16-27) of an event id.
constexpr uint32_t eventClass(uint32_t Id) { return (Id >> XT_CLASS_SHIFT) & 0xfff; }

} // namespace vmxsim::trace
