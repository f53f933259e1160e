// Small file helpers shared by the tests.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace vmxsim::test {

/// The whole file as bytes; empty if it cannot be read (the test's own checks then fail).
inline std::string readFile(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  std::stringstream S;
  S << In.rdbuf();
  return S.str();
}

/// A path in the temporary folder named by the test and this process: Test_PID_Name.
inline std::string tempPath(const std::string &Test, const std::string &Name) {
  return (std::filesystem::temp_directory_path() /
          (Test + "_" + std::to_string(::getpid()) + "_" + Name))
      .string();
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

/// The guest cache's Debian kernel and busybox initramfs (scripts/fetch-guests.sh), or
/// empty strings when the cache lacks them.
struct DebianLinuxKit {
  std::string Kernel, Initrd;
  explicit operator bool() const { return !Kernel.empty(); }
};
inline DebianLinuxKit debianLinuxKit() {
  const std::string Cache = guestCache();
  const std::string Kernel = Cache + "/vmlinuz", Initrd = Cache + "/initramfs.cpio.gz";
  if (Cache.empty() || !std::ifstream(Kernel) || !std::ifstream(Initrd))
    return {};
  return {Kernel, Initrd};
}

} // namespace vmxsim::test
