// RCPSS/RCPPS and RSQRTSS/RSQRTPS: vmxsim's approximations (SDM Vol. 2B, RCPPS, RCPSS,
// RSQRTPS, RSQRTSS).
//
// The SDM specifies these only by a bound, |relative error| <= 1.5 * 2^-12, and by their
// special cases; the bits are the implementation's, and Intel's and AMD's differ. vmxsim
// is an implementation of its own, the same on every host: the exact reciprocal (square
// root) computed in IEEE double precision, rounded to nearest-even at 12 fraction bits
// (bits 10:0 of the single-precision result are zero). Its relative error is at most
// 2^-13 plus the double rounding's 2^-52, inside the bound. docs/peer-deviations.md lists
// the difference from a given processor's bits.
//
// Special cases, as the SDM's pages say: no exception is ever raised and MXCSR (rounding
// control, DAZ, FTZ) is not consulted; a denormal source is a 0.0 of its sign; 0.0 gives
// infinity of its sign; an SNaN becomes its QNaN and a QNaN is returned; RCP of infinity
// is 0.0 of its sign; a tiny reciprocal (below 2^-126 after rounding) is flushed to 0.0
// of the operand's sign; RSQRT of a negative value other than -0.0 (or a negative
// denormal) is the QNaN floating-point indefinite, and of +infinity +0.0.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace vmxsim::sse {

namespace approx {
inline constexpr uint32_t kSign = 0x80000000u, kInf = 0x7f800000u, kQuiet = 0x00400000u;
inline constexpr uint32_t kIndefinite = 0xffc00000u;

/// V (positive, finite, not 0) rounded to nearest-even at 12 fraction bits, as single
/// precision; 0 when the rounded value is below the smallest normal 2^-126.
inline uint32_t round12(double V) {
  uint64_t U = std::bit_cast<uint64_t>(V);
  constexpr unsigned Drop = 52 - 12;
  U += (uint64_t(1) << (Drop - 1)) - 1 + ((U >> Drop) & 1);
  U &= ~((uint64_t(1) << Drop) - 1);
  const double R = std::bit_cast<double>(U);
  if (R < 0x1p-126)
    return 0;
  return std::bit_cast<uint32_t>(float(R)); // exact: 12 fraction bits, normal range
}
} // namespace approx

/// RCPSS's result for the single-precision bits X.
inline uint32_t approxReciprocal(uint32_t X) {
  using namespace approx;
  const uint32_t Sign = X & kSign, Exp = (X >> 23) & 0xff, Frac = X & 0x7fffff;
  if (Exp == 0xff)
    return Frac ? X | kQuiet : Sign;
  if (Exp == 0)
    return Sign | kInf;
  const double V = 1.0 / double(std::bit_cast<float>(X & ~kSign));
  return Sign | round12(V);
}

/// RSQRTSS's result for the single-precision bits X.
inline uint32_t approxReciprocalSqrt(uint32_t X) {
  using namespace approx;
  const uint32_t Sign = X & kSign, Exp = (X >> 23) & 0xff, Frac = X & 0x7fffff;
  if (Exp == 0xff && Frac)
    return X | kQuiet;
  if (Exp == 0)
    return Sign | kInf;
  if (Sign)
    return kIndefinite;
  if (Exp == 0xff)
    return 0;
  const double V = 1.0 / std::sqrt(double(std::bit_cast<float>(X)));
  return round12(V);
}

} // namespace vmxsim::sse
