// The tests' deterministic random generator: vmxsim's own (harness/random.h), so that
// a failure names a seed and replays identically on every host and compiler.
#pragma once
#include "harness/random.h"

namespace vmxsim::test {
using vmxsim::SplitMix64;
} // namespace vmxsim::test
