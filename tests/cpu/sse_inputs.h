// Random inputs of the SSE host oracles (sse_oracle_test, sse_fp_oracle_test,
// simd_ext_oracle_test): integer lanes biased towards lane edge cases, floating-point
// lanes biased towards the special values that tell implementations apart, and MXCSR
// values.
#pragma once
#include "tests/support/random.h"

#include <cstdint>

namespace vmxsim::test {

/// A value with a bias towards lane edge cases (0, -1, sign boundaries).
inline uint64_t interesting(SplitMix64 &Rng) {
  uint64_t V = Rng.next();
  if (Rng.nextBelow(4) == 0) {
    static const uint8_t Special[] = {0x00, 0xff, 0x80, 0x7f, 0x01, 0xfe};
    for (unsigned B = 0; B < 8; ++B)
      if (Rng.nextBelow(2))
        V = (V & ~(0xffull << (8 * B))) | (uint64_t(Rng.pick(Special)) << (8 * B));
  }
  return V;
}
/// What the lanes of the inputs hold.
enum class Elem : uint8_t { F32, F64, I32 };

/// A double biased towards the cases that distinguish implementations.
inline uint64_t randomF64(SplitMix64 &Rng) {
  const uint64_t Sign = Rng.nextBelow(2) ? 1ull << 63 : 0, Mant = Rng.next() & ((1ull << 52) - 1);
  auto withExp = [&](uint64_t E) { return Sign | (E << 52) | Mant; };
  switch (Rng.nextBelow(16)) {
  case 0: { // exact specials
    static const uint64_t S[] = {0, 0x7ff0000000000000, 0x3ff0000000000000,
                                 0x0010000000000000, 0x7fefffffffffffff, 0x000fffffffffffff};
    return Sign | Rng.pick(S);
  }
  case 1: // QNaN with a payload
    return Sign | 0x7ff8000000000000 | (Mant >> 1);
  case 2: // SNaN
    return Sign | 0x7ff0000000000000 | ((Mant >> 1) | 1);
  case 3: // denormal
    return Sign | (Mant >> Rng.nextBelow(52));
  case 4: // around the smallest normals: products and quotients land in the denormals
    return withExp(1 + Rng.nextBelow(40));
  case 5: // around overflow
    return withExp(0x7fe - Rng.nextBelow(40));
  case 6: { // integer-conversion boundaries: 2^31, 2^63 and their neighbours
    const uint64_t E = Rng.nextBelow(2) ? 1023 + 31 : 1023 + 63;
    return Sign | ((E - Rng.nextBelow(2)) << 52) | (Rng.nextBelow(2) ? Mant : Mant >> 48);
  }
  case 7: // halfway cases for rounding to integers: small values with .5 fractions
    return withExp(1023 + Rng.nextBelow(24)) & ~((1ull << (52 - Rng.nextBelow(26))) - 1);
  case 8: // few mantissa bits: exact sums and products
    return withExp(1023 - 8 + Rng.nextBelow(16)) & ~((1ull << 40) - 1);
  default: // values near 1 so that operands interact
    return withExp(1023 - 30 + Rng.nextBelow(60));
  }
}

inline uint32_t randomF32(SplitMix64 &Rng) {
  const uint32_t Sign = Rng.nextBelow(2) ? 1u << 31 : 0, Mant = uint32_t(Rng.next()) & 0x7fffff;
  auto withExp = [&](uint32_t E) { return Sign | (E << 23) | Mant; };
  switch (Rng.nextBelow(16)) {
  case 0: {
    static const uint32_t S[] = {0, 0x7f800000, 0x3f800000, 0x00800000, 0x7f7fffff, 0x007fffff};
    return Sign | Rng.pick(S);
  }
  case 1:
    return Sign | 0x7fc00000 | (Mant >> 1);
  case 2:
    return Sign | 0x7f800000 | ((Mant >> 1) | 1);
  case 3:
    return Sign | (Mant >> Rng.nextBelow(23));
  case 4:
    return withExp(1 + Rng.nextBelow(20));
  case 5:
    return withExp(0xfe - Rng.nextBelow(20));
  case 6: {
    const uint32_t E = Rng.nextBelow(2) ? 127 + 31 : 127 + 63;
    return Sign | ((E - Rng.nextBelow(2)) << 23) | (Rng.nextBelow(2) ? Mant : Mant >> 19);
  }
  case 7:
    return withExp(127 + Rng.nextBelow(12)) & ~((1u << (23 - Rng.nextBelow(12))) - 1);
  case 8:
    return withExp(127 - 4 + Rng.nextBelow(8)) & ~((1u << 14) - 1);
  default:
    return withExp(127 - 20 + Rng.nextBelow(40));
  }
}

inline uint64_t randomInt(SplitMix64 &Rng) {
  switch (Rng.nextBelow(6)) {
  case 0: {
    static const uint64_t S[] = {0, 1, ~0ull, 0x7fffffff, 0x80000000, 0x7fffffffffffffff,
                                 0x8000000000000000, 0xffffffff80000000};
    return Rng.pick(S);
  }
  case 1: // small magnitudes, either sign
    return uint64_t(int64_t(Rng.nextBelow(2000)) - 1000);
  case 2: // 24/53-bit boundaries where single/double conversion starts to round
    return (1ull << (24 + Rng.nextBelow(40))) + Rng.nextBelow(5) - 2;
  default:
    return Rng.next() >> Rng.nextBelow(64);
  }
}

/// 64 bits of lanes of type E.
inline uint64_t randomLanes(SplitMix64 &Rng, Elem E) {
  switch (E) {
  case Elem::F64:
    return randomF64(Rng);
  case Elem::F32:
    return uint64_t(randomF32(Rng)) | (uint64_t(randomF32(Rng)) << 32);
  case Elem::I32:
    return uint32_t(randomInt(Rng)) | (uint64_t(uint32_t(randomInt(Rng))) << 32);
  }
  return 0;
}

/// Random MXCSR: rounding control, FTZ, DAZ and sticky flags; Unmask selects which
/// exception masks are cleared.
inline uint32_t randomMxcsr(SplitMix64 &Rng, uint32_t Unmask) {
  uint32_t V = 0x1f80 | (Rng.nextBelow(4) << 13) | (Rng.nextBelow(2) ? 0x8000 : 0) |
               (Rng.nextBelow(2) ? 0x40 : 0);
  if (Rng.nextBelow(4) == 0)
    V |= Rng.next() & 0x3f;
  return V & ~(Unmask << 7);
}

} // namespace vmxsim::test
