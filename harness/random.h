// The one deterministic random generator of vmxsim: the differential fuzzer
// (harness/kvm/) and the tests (tests/support/random.h) draw from it, so that a failure
// names a seed and replays identically on every host and compiler (never
// std::random_device, never a library engine whose sequence is implementation-defined).
// Nothing guest-visible depends on it outside those seeded generators.
#pragma once
#include <cstddef>
#include <cstdint>

namespace vmxsim {

/// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators"):
/// one 64-bit state word, a fixed sequence for every seed.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t Seed) : State(Seed) {}

  uint64_t next() {
    uint64_t Z = (State += 0x9e3779b97f4a7c15ull);
    Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ull;
    Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebull;
    return Z ^ (Z >> 31);
  }

  /// A value in [0, N) as next() % N (the small modulo bias does not matter here).
  /// N = 0 gives 0 without drawing, so that a caller sizing by an empty buffer is safe.
  uint64_t nextBelow(uint64_t N) { return N ? next() % N : 0; }

  /// True with probability Percent / 100 (one draw).
  bool chance(unsigned Percent) { return nextBelow(100) < Percent; }

  /// An element of Table, chosen uniformly.
  template <typename T, std::size_t N> const T &pick(const T (&Table)[N]) {
    return Table[nextBelow(N)];
  }

private:
  uint64_t State;
};

} // namespace vmxsim
