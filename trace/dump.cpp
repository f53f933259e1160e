#include "trace/dump.h"

#include "trace/vmx_names.h"
#include "trace/events.h"

#include <fmt/format.h>

#include <vector>

namespace vmxsim::trace {

namespace {

std::string formatReason(uint32_t V) {
  const uint32_t Basic = V & 0xffff;
  std::string S = std::to_string(Basic);
  if (const char *N = exitReasonEnumName(Basic))
    S += fmt::format("({})", N);
  // Bit 31: VM-entry failure (SDM Vol. 3C, "Basic VM-Exit Information").
  if (V & 0x80000000u)
    S += "|EntryFailure";
  if (V & 0x7fff0000u)
    S += fmt::format("|{:#x}", V & 0x7fff0000u);
  return S;
}

std::string formatCheck(uint32_t V) {
  if (V == 0xffff)
    return "none";
  if (const char *Name = vmEntryCheckName(V))
    return fmt::format("{}({})", V, Name);
  return std::to_string(V);
}

/// A xen-3.0 record's five items by its row's layout (every item one field), or raw.
std::string formatXen30Fields(const TraceRecord &R) {
  std::string Out;
  const Xen30EventInfo *E = findXen30Event(R.Event);
  size_t Pos = 0;
  for (unsigned I = 0; I < XT30_ITEMS; ++I) {
    Field F;
    const bool Named = E && nextField(E->Layout, Pos, F);
    if (!Out.empty())
      Out += ' ';
    Out += Named ? std::string(F.Name) : fmt::format("d{}", I);
    Out += '=';
    const uint64_t V = R.Items[I];
    if (Named && F.Kind == FieldKind::Dec)
      Out += std::to_string(V);
    else if (Named && F.Kind == FieldKind::Reason && V <= UINT32_MAX)
      Out += formatReason(uint32_t(V));
    else
      Out += fmt::format("{:#x}", V);
  }
  return Out;
}

} // namespace

std::string formatFields(const TraceRecord &R) {
  if (R.Flavour == TraceFlavour::Xen30)
    return formatXen30Fields(R);
  std::string Out;
  auto Add = [&](std::string_view Name, const std::string &Value) {
    if (!Out.empty())
      Out += ' ';
    Out.append(Name.data(), Name.size());
    Out += '=';
    Out += Value;
  };
  const EventInfo *E = findEvent(R.Event);
  unsigned W = 0;
  if (E) {
    size_t Pos = 0;
    Field F;
    while (nextField(E->Layout, Pos, F) && W + F.Words <= R.NumWords) {
      const uint32_t V = R.Words[W];
      const uint64_t V64 = F.Words == 2 ? uint64_t(V) | uint64_t(R.Words[W + 1]) << 32 : V;
      switch (F.Kind) {
      case FieldKind::Hex:
      case FieldKind::Hex64:
        Add(F.Name, fmt::format("{:#x}", V64));
        break;
      case FieldKind::Dec:
      case FieldKind::Dec64:
        Add(F.Name, std::to_string(V64));
        break;
      case FieldKind::Signed:
        Add(F.Name, std::to_string(int32_t(V)));
        break;
      case FieldKind::DomVcpu:
        Add(F.Name, fmt::format("d{}v{}", V >> 16, V & 0xffff));
        break;
      case FieldKind::VcpuDom:
        Add(F.Name, fmt::format("d{}v{}", V & 0xffff, V >> 16));
        break;
      case FieldKind::Reason:
        Add(F.Name, formatReason(V));
        break;
      case FieldKind::Check:
        Add(F.Name, formatCheck(V));
        break;
      }
      W += F.Words;
    }
  }
  for (; W < R.NumWords; ++W)
    Add(fmt::format("w{}", W), fmt::format("{:#x}", R.Words[W]));
  if (E && (R.NumWords < E->MinWords || R.NumWords > E->MaxWords)) {
    if (!Out.empty())
      Out += ' ';
    Out += E->MinWords == E->MaxWords
               ? fmt::format("(bad word count {}, expected {})", R.NumWords, E->MinWords)
               : fmt::format("(bad word count {}, expected {}..{})", R.NumWords, E->MinWords,
                             E->MaxWords);
  }
  return Out;
}

std::string formatRecord(const TraceRecord &R, uint64_t Delta) {
  const char *Known = nullptr;
  if (R.Flavour == TraceFlavour::Xen30) {
    if (const Xen30EventInfo *E = findXen30Event(R.Event))
      Known = E->Name;
  } else if (const EventInfo *E = findEvent(R.Event)) {
    Known = E->Name;
  }
  std::string Name = Known ? Known : fmt::format("UNKNOWN({:#010x})", R.Event);
  std::string Line = fmt::format("CPU{} {} {} {}", R.Cpu, R.Tsc,
                                 R.HasTsc ? fmt::format("+{}", Delta) : std::string("-"), Name);
  std::string Fields = formatFields(R);
  if (!Fields.empty())
    Line += ' ' + Fields;
  return Line;
}

bool dumpTrace(TraceReader &Reader, std::FILE *Out) {
  std::vector<uint64_t> Prev(XT_MAX_CPUS, 0);
  std::vector<bool> Seen(XT_MAX_CPUS, false);
  TraceRecord R;
  while (Reader.next(R)) {
    uint64_t Delta = 0;
    if (R.HasTsc) {
      Delta = Seen[R.Cpu] ? R.Tsc - Prev[R.Cpu] : 0;
      Prev[R.Cpu] = R.Tsc;
      Seen[R.Cpu] = true;
    }
    std::string Line = formatRecord(R, Delta);
    Line += '\n';
    std::fwrite(Line.data(), 1, Line.size(), Out);
  }
  return !Reader.failed();
}

} // namespace vmxsim::trace
