#include "trace/import_files.h"

#include "trace/writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace vmxsim::trace {

std::optional<std::string> readImportInput(const std::string &Path, std::FILE *Err) {
  std::ifstream F(Path, std::ios::binary);
  if (!F) {
    fmt::print(Err, "vmxsim: error: cannot open '{}': {}\n", Path, std::strerror(errno));
    return std::nullopt;
  }
  std::stringstream SS;
  SS << F.rdbuf();
  if (F.bad()) {
    fmt::print(Err, "vmxsim: error: cannot read '{}'\n", Path);
    return std::nullopt;
  }
  return SS.str();
}

bool writeImportOutput(const std::string &Path, const void *Data, size_t Bytes, std::FILE *Err) {
  FileOutput File;
  std::string Why;
  if (!File.open(Path, Why) || !File.write(Data, Bytes) || !File.close()) {
    fmt::print(Err, "vmxsim: error: {}\n", Why.empty() ? File.failure() : Why);
    return false;
  }
  return true;
}

} // namespace vmxsim::trace
