// Small file helpers shared by the tests.
#pragma once
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

} // namespace vmxsim::test
