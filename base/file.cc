#include "base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/allocation.h"

namespace kiln {
namespace {

Error cannot_read(const std::string& path, const std::string& why) {
  return make_error("cannot read '" + path + "': " + why);
}

}  // namespace

Result<InputFile> InputFile::open(const std::string& path) {
  if (path == "-") {
    struct stat st {};
    std::optional<uint64_t> size;
    if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) size = static_cast<uint64_t>(st.st_size);
    return InputFile("<stdin>", STDIN_FILENO, false, size);
  }
  if (path.empty()) return make_error("cannot read '': the file name is empty");
  // Check before opening: open() on a FIFO would wait for a writer, on a directory it
  // succeeds and only the read fails.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return cannot_read(path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return cannot_read(path, "it is a directory");
  if (S_ISSOCK(st.st_mode)) return cannot_read(path, "it is a socket, not a file");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cannot_read(path, std::strerror(errno));
  // The file may have been replaced between stat and open: ask the open descriptor.
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    return cannot_read(path, S_ISDIR(st.st_mode) ? "it is a directory" : std::strerror(errno));
  }
  std::optional<uint64_t> size;
  if (S_ISREG(st.st_mode)) size = static_cast<uint64_t>(st.st_size);
  return InputFile(path, fd, true, size);
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), owned_(other.owned_), reported_size_(other.reported_size_) {
  other.fd_ = -1;
  other.owned_ = false;
}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (owned_) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    owned_ = other.owned_;
    reported_size_ = other.reported_size_;
    other.fd_ = -1;
    other.owned_ = false;
  }
  return *this;
}

InputFile::~InputFile() {
  if (owned_) ::close(fd_);
}

Result<uint64_t> InputFile::read_raw(uint8_t* data, uint64_t count) {
  uint64_t done = 0;
  while (done < count) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(count - done, uint64_t{1} << 30));
    ssize_t got = ::read(fd_, data + done, chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return cannot_read(path_, std::strerror(errno));
    if (got == 0) break;
    done += static_cast<uint64_t>(got);
  }
  return done;
}

template <class Bytes>
Status InputFile::read_into(Bytes& out, uint64_t count) {
  // Grow in steps: a header may claim far more than the file holds, and only a file
  // that really has the bytes gets the memory for them.
  while (count > 0) {
    const uint64_t step = std::min<uint64_t>(count, std::max<uint64_t>(uint64_t{1} << 20, out.size()));
    const uint64_t before = out.size();
    KILN_RETURN_IF_ERROR(resize_or_error(out, before + step, "reading '" + path_ + "'"));
    KILN_ASSIGN_OR_RETURN(uint64_t got, read_raw(reinterpret_cast<uint8_t*>(out.data()) + before, step));
    out.resize(before + got);
    if (got < step) break;
    count -= step;
  }
  return Status::Ok();
}

Status InputFile::read(std::string& out, uint64_t count) { return read_into(out, count); }
Status InputFile::read(std::vector<uint8_t>& out, uint64_t count) { return read_into(out, count); }

Result<bool> InputFile::at_end() {
  uint8_t byte = 0;
  KILN_ASSIGN_OR_RETURN(uint64_t got, read_raw(&byte, 1));
  return got == 0;
}

Status write_file(const std::string& path, std::string_view bytes) {
  auto cannot_write = [&](int error) { return make_error("cannot write '" + path + "': " + std::strerror(error)); };
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return cannot_write(errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t wrote = ::write(fd, bytes.data() + done, std::min<size_t>(bytes.size() - done, size_t{1} << 30));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      int error = wrote < 0 ? errno : EIO;
      ::close(fd);
      return cannot_write(error);
    }
    done += static_cast<size_t>(wrote);
  }
  if (::close(fd) != 0) return cannot_write(errno);
  return Status::Ok();
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

Result<std::string> read_file(const std::string& path, uint64_t max_bytes) {
  KILN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  if (file.reported_size() && *file.reported_size() > max_bytes)
    return make_error("'" + file.path() + "' is " + std::to_string(*file.reported_size()) +
                      " bytes, more than the limit of " + std::to_string(max_bytes) + " bytes");
  std::string text;
  KILN_RETURN_IF_ERROR(file.read(text, max_bytes));
  if (text.size() == max_bytes) {
    KILN_ASSIGN_OR_RETURN(bool end, file.at_end());
    if (!end)
      return make_error("'" + file.path() + "' holds more than the limit of " + std::to_string(max_bytes) + " bytes" +
                        (file.reported_size() ? " (it grew while being read)" : ""));
  }
  return text;
}

}  // namespace kiln
