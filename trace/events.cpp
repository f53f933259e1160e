#include "trace/events.h"

namespace vmxsim::trace {

namespace {
// Row numbers of kEvents, so the lookup below names rows, not positions.
enum EventRow : unsigned {
#define TRACE_EVENT(Name, Class, Subclass, Number, Tsc, MinWords, MaxWords, Str, Layout) \
  Row##Name,
#include "trace/events.def"
};
enum Xen30Row : unsigned {
#define TRACE_XEN30_EVENT(Name, Class, Subclass, Number, Str, Layout) Xen30Row##Name,
#include "trace/events.def"
};
} // namespace

const EventInfo *findEvent(uint32_t Id) {
  // A switch generated from the table: the compiler builds the lookup.
  switch (Id & XT_EVENT_MASK) {
#define TRACE_EVENT(Name, Class, Subclass, Number, Tsc, MinWords, MaxWords, Str, Layout) \
  case XT_EV_##Name:                                                                    \
    return &kEvents[Row##Name];
#include "trace/events.def"
  }
  return nullptr;
}

const Xen30EventInfo *findXen30Event(uint32_t Id) {
  switch (Id & XT_EVENT_MASK) {
#define TRACE_XEN30_EVENT(Name, Class, Subclass, Number, Str, Layout)                     \
  case XT30_EV_##Name:                                                                  \
    return &kXen30Events[Xen30Row##Name];
#include "trace/events.def"
  }
  return nullptr;
}

} // namespace vmxsim::trace
