#include "examples/fashion_mnist_data.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "base/allocation.h"

namespace kiln::examples {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr uint64_t kImagesHeaderBytes = 16;    // magic, count, rows, cols
constexpr uint64_t kLabelsHeaderBytes = 8;     // magic, count
constexpr int64_t kNumClasses = 10;
// More pixels than this in one file is a corrupt header, not a dataset (4 TiB as floats).
constexpr uint64_t kMaxPixels = uint64_t{1} << 40;
// Bytes asked of zlib per gzread call (its length is an unsigned int).
constexpr uint64_t kChunkBytes = uint64_t{1} << 20;

struct GzClose {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzClose>;

// Opens `path` for gzread, which reads gzip and plain files alike. The file is opened
// here rather than by gzopen so that errno is the open's (gzopen may also fail on its
// own allocation) and a directory is refused up front.
Result<GzHandle> open_gz(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return make_error(fmt::format("cannot open {}: {}", path, std::strerror(EISDIR)));
  }
  gzFile file = gzdopen(fd, "rb");
  if (file == nullptr) {
    ::close(fd);
    return make_error(fmt::format("cannot open {}: zlib could not allocate its state", path));
  }
  gzbuffer(file, 1 << 17);
  return GzHandle(file);
}

// Reads up to `count` bytes, handing each chunk to `sink(const uint8_t*, size_t)`.
// Returns the number of bytes read: fewer than `count` only at the end of the data.
// A gzip stream cut short ends the data like a plain file's end (see truncation_note).
template <class Sink>
Result<uint64_t> read_bytes(gzFile file, const std::string& path, uint64_t count, Sink&& sink) {
  std::unique_ptr<uint8_t[]> buffer(new (std::nothrow) uint8_t[kChunkBytes]);
  if (!buffer) return allocation_error(kChunkBytes, "a read buffer");
  uint64_t total = 0;
  while (total < count) {
    const unsigned want = static_cast<unsigned>(std::min(count - total, kChunkBytes));
    const int got = gzread(file, buffer.get(), want);
    if (got < 0) {
      int errnum = Z_OK;
      std::string message = gzerror(file, &errnum);
      if (errnum == Z_ERRNO) message = std::strerror(errno);
      // zlib names the file "<fd:N>" (it was opened by descriptor): the path replaces it.
      if (message.rfind("<fd:", 0) == 0 && message.find(": ") != std::string::npos) {
        message = message.substr(message.find(": ") + 2);
      }
      return make_error(fmt::format("cannot read {}: {}", path, message));
    }
    if (got == 0) break;
    KILN_RETURN_IF_ERROR(sink(buffer.get(), static_cast<size_t>(got)));
    total += static_cast<uint64_t>(got);
  }
  return total;
}

// What a truncation message adds when the file is a gzip stream that stops early (zlib
// reports it as the end of the data, with Z_BUF_ERROR).
std::string truncation_note(gzFile file) {
  int errnum = Z_OK;
  gzerror(file, &errnum);
  return errnum == Z_BUF_ERROR ? " (the gzip stream ends early)" : "";
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The header of an IDX file: its magic number checked, then each 32-bit dimension.
// `dims` is 3 for images (count, rows, cols) and 1 for labels (count); `what` is
// "images" or "labels", for messages.
Result<std::vector<uint64_t>> read_header(gzFile file, const std::string& path, uint32_t magic, int dims,
                                          const char* what) {
  const uint64_t header_bytes = 4 + 4 * static_cast<uint64_t>(dims);
  std::vector<uint8_t> header;
  auto append = [&](const uint8_t* data, size_t n) {
    header.insert(header.end(), data, data + n);
    return Status::Ok();
  };
  auto truncated = [&]() {
    return make_error(fmt::format("{} is truncated: expected {} bytes (the header of an IDX {} file), read {}{}", path,
                                  header_bytes, what, header.size(), truncation_note(file)));
  };
  KILN_ASSIGN_OR_RETURN(uint64_t got, read_bytes(file, path, 4, append));
  if (got < 4) return truncated();
  const uint32_t found = big_endian_u32(header.data());
  if (found != magic) {
    return make_error(
        fmt::format("{}: bad magic number 0x{:08x}, expected 0x{:08x} (an IDX {} file: unsigned bytes, {} {})", path,
                    found, magic, what, dims, dims == 1 ? "dimension" : "dimensions"));
  }
  KILN_RETURN_IF_ERROR(read_bytes(file, path, header_bytes - 4, append));
  if (header.size() < header_bytes) return truncated();
  std::vector<uint64_t> sizes;
  for (int d = 0; d < dims; ++d) sizes.push_back(big_endian_u32(header.data() + 4 + 4 * d));
  return sizes;
}

// The number of examples to keep of `count`.
uint64_t kept_count(uint64_t count, int64_t limit) {
  return limit < 0 ? count : std::min(count, static_cast<uint64_t>(limit));
}

}  // namespace

Result<Dataset> read_idx_pair(const std::string& images_gz, const std::string& labels_gz, int64_t limit) {
  KILN_ASSIGN_OR_RETURN(GzHandle images_file, open_gz(images_gz));
  KILN_ASSIGN_OR_RETURN(std::vector<uint64_t> image_dims,
                        read_header(images_file.get(), images_gz, kImagesMagic, 3, "images"));
  const uint64_t count = image_dims[0], rows = image_dims[1], cols = image_dims[2];
  if (rows == 0 || cols == 0) {
    return make_error(
        fmt::format("{}: bad image size {}x{} (rows and columns must be at least 1)", images_gz, rows, cols));
  }
  // Each factor is below 2^32: rows * cols cannot overflow, count * (rows * cols) can.
  const uint64_t image_pixels = rows * cols;
  uint64_t pixels = 0;
  if (__builtin_mul_overflow(count, image_pixels, &pixels) || pixels > kMaxPixels) {
    return make_error(fmt::format("{}: {} images of {}x{} is too large (more than {} pixels)", images_gz, count, rows,
                                  cols, kMaxPixels));
  }

  KILN_ASSIGN_OR_RETURN(GzHandle labels_file, open_gz(labels_gz));
  KILN_ASSIGN_OR_RETURN(std::vector<uint64_t> label_dims,
                        read_header(labels_file.get(), labels_gz, kLabelsMagic, 1, "labels"));
  if (label_dims[0] != count) {
    return make_error(
        fmt::format("{} holds {} images but {} holds {} labels", images_gz, count, labels_gz, label_dims[0]));
  }

  Dataset data;
  const uint64_t n = kept_count(count, limit);
  const uint64_t kept_pixels = n * image_pixels;
  data.count = static_cast<int64_t>(n);
  data.rows = static_cast<int64_t>(rows);
  data.cols = static_cast<int64_t>(cols);

  // The images, converted chunk by chunk: memory grows with the bytes actually read, so
  // a header that promises more than the file holds costs no more than the file.
  const std::string images_what = "the images of " + images_gz;
  KILN_RETURN_IF_ERROR(check_allocation(kept_pixels * sizeof(float), images_what));
  try {
    data.images.reserve(static_cast<size_t>(std::min<uint64_t>(kept_pixels, uint64_t{1} << 26)));
  } catch (const std::exception&) {
    return allocation_error(kept_pixels * sizeof(float), images_what);
  }
  auto append_pixels = [&](const uint8_t* bytes, size_t size) -> Status {
    try {
      for (size_t i = 0; i < size; ++i) data.images.push_back(static_cast<float>(bytes[i]) / 255.0f);
    } catch (const std::exception&) {
      return allocation_error(kept_pixels * sizeof(float), images_what);
    }
    return Status::Ok();
  };
  KILN_ASSIGN_OR_RETURN(uint64_t pixels_read, read_bytes(images_file.get(), images_gz, kept_pixels, append_pixels));
  if (pixels_read < kept_pixels) {
    return make_error(
        fmt::format("{} is truncated: expected {} bytes (a {}-byte header and {} images of {}x{}), read {}{}",
                    images_gz, kImagesHeaderBytes + pixels, kImagesHeaderBytes, count, rows, cols,
                    kImagesHeaderBytes + pixels_read, truncation_note(images_file.get())));
  }

  // The labels, each checked against the ten classes.
  try {
    data.labels.reserve(static_cast<size_t>(n));
  } catch (const std::exception&) {
    return allocation_error(n * sizeof(int32_t), "the labels of " + labels_gz);
  }
  auto append_labels = [&](const uint8_t* bytes, size_t size) -> Status {
    for (size_t i = 0; i < size; ++i) {
      if (bytes[i] >= kNumClasses) {
        return make_error(fmt::format("{}: label {} of example {} is out of range 0..{}", labels_gz, bytes[i],
                                      data.labels.size(), kNumClasses - 1));
      }
      data.labels.push_back(bytes[i]);
    }
    return Status::Ok();
  };
  KILN_ASSIGN_OR_RETURN(uint64_t labels_read, read_bytes(labels_file.get(), labels_gz, n, append_labels));
  if (labels_read < n) {
    return make_error(fmt::format("{} is truncated: expected {} bytes (an {}-byte header and {} labels), read {}{}",
                                  labels_gz, kLabelsHeaderBytes + count, kLabelsHeaderBytes, count,
                                  kLabelsHeaderBytes + labels_read, truncation_note(labels_file.get())));
  }
  return data;
}

Result<Dataset> read_fashion_mnist(const std::string& dir, bool train, int64_t limit) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  return read_idx_pair(prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz", limit);
}

std::string default_fashion_mnist_dir() {
  const char* dir = std::getenv("KILN_FASHION_MNIST");
  return dir != nullptr && dir[0] != '\0' ? dir : "/usr/share/datasets/fashion-mnist";
}

void shuffle_order(std::vector<int64_t>& order, uint64_t seed) {
  uint64_t state = seed;
  // splitmix64 (Steele, Lea and Flood; the constants of Vigna's reference code).
  auto next = [&state]() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  // A uniform draw in [0, bound): rejects the low values that would make r % bound biased.
  auto below = [&next](uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  };
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(below(i));
    std::swap(order[i - 1], order[j]);
  }
}

}  // namespace kiln::examples
