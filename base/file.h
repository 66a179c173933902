// Reading files with limits. Every reader in kiln (text IR, .npy, safetensors, artifacts)
// goes through here, so that a directory, a device that never ends (/dev/zero), a pipe or
// a file larger than memory is an error that names the file, never a crash or a hang.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln {

/// A file opened for reading: a regular file, a pipe or FIFO, a character device, or
/// standard input ("-"). Directories are refused when opened.
class InputFile {
 public:
  /// Opens `path`; "-" is standard input. The error says why ("cannot read 'x': it is a
  /// directory", "...: No such file or directory").
  static Result<InputFile> open(const std::string& path);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  const std::string& path() const { return path_; }
  /// The size the OS reports for a regular file; none for pipes, devices and stdin,
  /// whose length is only known at their end. A file can change while it is read, so
  /// readers never trust it beyond choosing an error message.
  std::optional<uint64_t> reported_size() const { return reported_size_; }

  /// Appends up to `count` more bytes to `out`, fewer only at the end of the file.
  /// Refuses (before reading) to hold more than this machine's memory in `out`.
  Status read(std::string& out, uint64_t count);
  Status read(std::vector<uint8_t>& out, uint64_t count);
  /// True when no byte is left (reads one byte to find out; a byte found is an error
  /// the caller words, so it is not kept).
  Result<bool> at_end();

 private:
  InputFile(std::string path, int fd, bool owned, std::optional<uint64_t> size)
      : path_(std::move(path)), fd_(fd), owned_(owned), reported_size_(size) {}
  // Reads up to `count` bytes into `data`; returns how many (0 at the end).
  Result<uint64_t> read_raw(uint8_t* data, uint64_t count);
  template <class Bytes>
  Status read_into(Bytes& out, uint64_t count);

  std::string path_;
  int fd_ = -1;
  bool owned_ = false;
  std::optional<uint64_t> reported_size_;
};

/// Reads a whole file ("-" for stdin) and fails, after reading at most `max_bytes + 1`
/// bytes, when it holds more than `max_bytes`: "'x' is 70000000 bytes, more than the
/// limit of 67108864 bytes" (or "holds more than" for pipes and devices).
Result<std::string> read_file(const std::string& path, uint64_t max_bytes);

/// Writes `bytes` to `path` (replacing it), checking every write and the close: a full
/// disk or a failing device is "cannot write 'x': No space left on device", never a file
/// silently cut short.
Status write_file(const std::string& path, std::string_view bytes);

/// Whether two paths name the same existing file (after links).
bool same_file(const std::string& a, const std::string& b);

}  // namespace kiln
