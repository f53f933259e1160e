// libFuzzer entry point for input logs (harness/input_log.h): any bytes through the
// parser; a log it accepts must print back to text it accepts again with the same
// events. No input may crash, hang or trip a sanitizer.
#include "harness/input_log.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace vmxsim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  InputLog L;
  if (InputLog::parse(std::string_view(reinterpret_cast<const char *>(Data), Size), L))
    return 0;
  InputLog Again;
  if (InputLog::parse(L.text(), Again) || Again.Events != L.Events)
    std::abort();
  return 0;
}
