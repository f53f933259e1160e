// Whole numbers as the command line and vmxsim's text files write them: decimal, or
// hexadecimal with 0x. No sign, no spaces, no suffix; a value that does not fit in 64 bits
// is refused rather than wrapped or clamped.
#pragma once
#include <cstdint>
#include <string_view>

namespace vmxsim {

inline bool parseWholeNumber(std::string_view S, uint64_t &Out) {
  unsigned Base = 10;
  if (S.size() > 2 && S[0] == '0' && (S[1] == 'x' || S[1] == 'X')) {
    Base = 16;
    S.remove_prefix(2);
  }
  if (S.empty())
    return false;
  uint64_t V = 0;
  for (const char C : S) {
    unsigned D;
    if (C >= '0' && C <= '9')
      D = unsigned(C - '0');
    else if (Base == 16 && C >= 'a' && C <= 'f')
      D = unsigned(C - 'a' + 10);
    else if (Base == 16 && C >= 'A' && C <= 'F')
      D = unsigned(C - 'A' + 10);
    else
      return false;
    if (V > (~uint64_t(0) - D) / Base)
      return false;
    V = V * Base + D;
  }
  Out = V;
  return true;
}

} // namespace vmxsim
