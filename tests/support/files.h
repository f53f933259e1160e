// Small file helpers shared by the tests.
#pragma once
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace vmxsim::test {

/// The whole file as bytes; empty if it cannot be read (the test's own checks then fail).
inline std::string readFile(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  std::stringstream S;
  S << In.rdbuf();
  return S.str();
}

/// scripts/fetch-guests.sh's cache of real guests (Debian's Linux, Xen, busybox): the same
/// directory the script fills; empty when no home directory is known.
inline std::string guestCache() {
  if (const char *C = std::getenv("VMXSIM_GUEST_CACHE"); C && *C)
    return C;
  if (const char *X = std::getenv("XDG_CACHE_HOME"); X && *X)
    return std::string(X) + "/vmxsim/guests";
  if (const char *H = std::getenv("HOME"); H && *H)
    return std::string(H) + "/.cache/vmxsim/guests";
  return {};
}

} // namespace vmxsim::test
