#include "trace/events.h"

namespace vmxsim::trace {

namespace {
// Row numbers of kEvents, so the lookup below names rows, not positions.
enum EventRow : unsigned {
#define TRACE_EVENT(Name, Class, Subclass, Number, Tsc, MinWords, MaxWords, Str, Layout) \
  Row##Name,
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

} // namespace vmxsim::trace
