#include "harness/loader.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vmxsim {

namespace {
const char *fileKind(mode_t Mode) {
  if (S_ISFIFO(Mode))
    return "a FIFO";
  if (S_ISDIR(Mode))
    return "a directory";
  if (S_ISCHR(Mode))
    return "a character device";
  if (S_ISBLK(Mode))
    return "a block device";
  if (S_ISSOCK(Mode))
    return "a socket";
  return "not a regular file";
}
} // namespace

ImageFile::~ImageFile() { reset(); }

ImageFile::ImageFile(ImageFile &&O) noexcept : Map(O.Map), Size(O.Size) {
  O.Map = nullptr;
  O.Size = 0;
}

ImageFile &ImageFile::operator=(ImageFile &&O) noexcept {
  if (this != &O) {
    reset();
    Map = O.Map;
    Size = O.Size;
    O.Map = nullptr;
    O.Size = 0;
  }
  return *this;
}

void ImageFile::reset() {
  if (Map)
    ::munmap(Map, Size);
  Map = nullptr;
  Size = 0;
}

Error ImageFile::open(const std::string &Path, uint64_t MaxBytes, ImageFile &Out) {
  Out.reset();
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer; the type check
  // below then refuses it (and any other file that is not a regular one).
  int Fd = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (Fd < 0)
    return Error(ErrorCode::FileUnreadable, std::string("cannot open: ") + std::strerror(errno));
  struct stat St;
  if (::fstat(Fd, &St) != 0) {
    int E = errno;
    ::close(Fd);
    return Error(ErrorCode::FileUnreadable, std::string("cannot stat: ") + std::strerror(E));
  }
  if (!S_ISREG(St.st_mode)) {
    ::close(Fd);
    return Error(ErrorCode::FileUnreadable,
                 fmt::format("is {}, not a regular file", fileKind(St.st_mode)));
  }
  const uint64_t Bytes = uint64_t(St.st_size);
  if (Bytes > MaxBytes) {
    ::close(Fd);
    return Error(ErrorCode::FileTooLarge,
                 fmt::format("file is {} bytes, more than the {} bytes that fit", Bytes, MaxBytes));
  }
  if (Bytes == 0) {
    ::close(Fd);
    return Error::success();
  }
  void *P = ::mmap(nullptr, Bytes, PROT_READ, MAP_PRIVATE, Fd, 0);
  const int E = errno;
  ::close(Fd);
  if (P == MAP_FAILED)
    return Error(ErrorCode::FileUnreadable, std::string("cannot map: ") + std::strerror(E));
  Out.Map = P;
  Out.Size = Bytes;
  return Error::success();
}

} // namespace vmxsim
