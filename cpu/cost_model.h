// Virtual-cycle costs by instruction class (table: cpu/cost_model.def).
#pragma once
#include <cstdint>

namespace vmxsim {

enum class CostClass : uint8_t {
#define COST(Class, Cycles, Desc) Class,
#include "cpu/cost_model.def"
#undef COST
};

inline constexpr uint8_t costOf(CostClass C) {
  constexpr uint8_t Table[] = {
#define COST(Class, Cycles, Desc) Cycles,
#include "cpu/cost_model.def"
#undef COST
  };
  return Table[unsigned(C)];
}

} // namespace vmxsim
