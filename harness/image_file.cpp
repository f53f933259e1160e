#include "harness/loader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vmxsim {

Error readImageFile(const std::string &Path, uint64_t MaxBytes, std::vector<uint8_t> &Out) {
  Out.clear();
  int Fd = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0)
    return Error(ErrorCode::FileUnreadable, std::string("cannot open: ") + std::strerror(errno));
  struct stat St;
  if (::fstat(Fd, &St) != 0 || !S_ISREG(St.st_mode)) {
    ::close(Fd);
    return Error(ErrorCode::FileUnreadable, "not a regular file");
  }
  uint64_t Size = uint64_t(St.st_size);
  if (Size > MaxBytes) {
    ::close(Fd);
    return Error(ErrorCode::FileTooLarge,
                 fmt::format("file is {} bytes, more than the {} bytes that fit", Size, MaxBytes));
  }
  Out.resize(Size);
  uint64_t Done = 0;
  while (Done < Size) {
    ssize_t N = ::read(Fd, Out.data() + Done, Size - Done);
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0) {
      int E = N < 0 ? errno : EIO;
      ::close(Fd);
      Out.clear();
      return Error(ErrorCode::FileUnreadable, std::string("cannot read: ") + std::strerror(E));
    }
    Done += uint64_t(N);
  }
  ::close(Fd);
  return Error::success();
}

} // namespace vmxsim
