//===- MappedFile.cpp -----------------------------------------------------===//
#include "runtime/MappedFile.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {

absl::StatusOr<std::unique_ptr<MappedFile>>
MappedFile::open(const std::string &path) {
  std::unique_ptr<MappedFile> file(new MappedFile());
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  file->size_ = uint64_t(st.st_size);
  if (file->size_ > 0) {
    file->map_ = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file->map_ == MAP_FAILED) {
      file->map_ = nullptr;
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": mmap failed: ", std::strerror(errno)));
    }
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (map_)
    ::munmap(map_, size_);
}

} // namespace kiln
