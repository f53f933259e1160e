#include "harness/exit_run.h"

#include "harness/whole_number.h"

#include <fmt/format.h>

#include <algorithm>

namespace vmxsim {

bool parseRegisterPoke(const std::string &S, RegisterPoke &Out, std::string &Why) {
  const size_t Colon = S.find(':'), Eq = S.find('=');
  if (Colon == std::string::npos || Eq == std::string::npos || Eq < Colon) {
    Why = fmt::format("'{}' is not N:REG=VALUE", S);
    return false;
  }
  RegisterPoke P;
  P.Register = S.substr(Colon + 1, Eq - Colon - 1);
  if (!parseWholeNumber(S.substr(0, Colon), P.AtExit) || P.AtExit == 0) {
    Why = fmt::format("'{}': the exit number must be a whole number from 1", S);
    return false;
  }
  if (P.Register.empty() || !parseWholeNumber(S.substr(Eq + 1), P.Value)) {
    Why = fmt::format("'{}' is not N:REG=VALUE (VALUE a whole number)", S);
    return false;
  }
  Out = P;
  return true;
}

ExitRun::ExitRun(Machine &M, std::vector<RegisterPoke> P, uint64_t Exits)
    : M(M), Pokes(std::move(P)), Exits(Exits) {
  std::stable_sort(Pokes.begin(), Pokes.end(),
                   [](const RegisterPoke &A, const RegisterPoke &B) { return A.AtExit < B.AtExit; });
}

ErrorOr<RunResult> ExitRun::run(const std::vector<StopWhen> &Until) {
  for (;;) {
    uint64_t Next = ~uint64_t(0);
    if (EveryExits)
      Next = (Exits / EveryExits + 1) * EveryExits;
    for (const RegisterPoke &P : Pokes)
      if (P.AtExit > Exits) {
        Next = std::min(Next, P.AtExit);
        break;
      }
    std::vector<StopWhen> Conds = Until;
    if (Next != ~uint64_t(0))
      Conds.push_back(StopWhen::vmExit().nth(Next - Exits));
    if (Conds.empty()) {
      RunResult R = M.run();
      return R;
    }
    ErrorOr<RunResult> R = M.runUntil(Conds);
    if (!R || R->Reason != RunReason::Stopped || R->Condition < Until.size())
      return R;
    // The Next-th exit: the pokes there, then the periodic call.
    Exits = Next;
    for (const RegisterPoke &P : Pokes)
      if (P.AtExit == Exits)
        if (Error E = M.writeRegister(R->CpuId, P.Register, P.Value)) {
          E.Message = fmt::format("--set-at-exit {}:{}: {}", P.AtExit, P.Register, E.Message);
          return E;
        }
    if (EveryExits && Exits % EveryExits == 0 && AtEvery)
      if (Error E = AtEvery(*R))
        return E;
  }
}

} // namespace vmxsim
