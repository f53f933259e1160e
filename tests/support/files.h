// Small file helpers shared by the tests.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
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

/// A shell command's exit status (-1: it did not exit) and its two outputs.
struct CommandResult {
  int Status;
  std::string Out, Err;
};
/// Runs Cmd with /bin/sh, its standard output and error into the files OutPath and
/// ErrPath (read, then removed) and its standard input from /dev/null.
inline CommandResult runShell(const std::string &Cmd, const std::string &OutPath,
                              const std::string &ErrPath) {
  const int St = std::system((Cmd + " >" + OutPath + " 2>" + ErrPath + " </dev/null").c_str());
  CommandResult R{WIFEXITED(St) ? WEXITSTATUS(St) : -1, readFile(OutPath), readFile(ErrPath)};
  std::remove(OutPath.c_str());
  std::remove(ErrPath.c_str());
  return R;
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
