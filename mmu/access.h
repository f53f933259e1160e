// The kind of a memory access, as the paging and EPT walkers and the processor name it.
#pragma once
#include <cstdint>

namespace vmxsim {

enum class Access : uint8_t { Read, Write, Fetch };

} // namespace vmxsim
