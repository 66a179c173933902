// Every file reader (text, .npy, safetensors, artifacts) on what is not a plain file of
// the right length: a directory, a FIFO, an endless device, an empty file, a file longer
// or shorter than its header says. Each is an error that names the file, never a crash or
// a hang.
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/allocation.h"
#include "base/file.h"
#include "runtime/format/artifact.h"
#include "runtime/format/safetensors.h"
#include "runtime/npy.h"

using namespace kiln;

namespace {

// A fresh directory under the test's temporary directory.
std::string temp_dir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::filesystem::path dir = std::filesystem::path(base ? base : "/tmp") / ("file_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string npy_bytes() {
  std::vector<uint8_t> data(12, 0);
  return runtime::serialize_npy({"f32", {3}, data});
}

}  // namespace

TEST_CASE("read_file: directories, missing and empty files, limits", "[file]") {
  std::string dir = temp_dir("read");
  auto d = read_file(dir, 100);
  REQUIRE(!d.ok());
  CHECK(d.error().message == "cannot read '" + dir + "': it is a directory");
  auto missing = read_file(dir + "/nope", 100);
  REQUIRE(!missing.ok());
  CHECK(missing.error().message == "cannot read '" + dir + "/nope': No such file or directory");
  auto none = read_file("", 100);
  REQUIRE(!none.ok());
  CHECK(none.error().message == "cannot read '': the file name is empty");
  write(dir + "/empty", "");
  auto empty = read_file(dir + "/empty", 100);
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  write(dir + "/ten", "0123456789");
  CHECK(*read_file(dir + "/ten", 10) == "0123456789");
  auto over = read_file(dir + "/ten", 9);
  REQUIRE(!over.ok());
  CHECK(over.error().message == "'" + dir + "/ten' is 10 bytes, more than the limit of 9 bytes");
}

TEST_CASE("read_file: a device that never ends stops at the limit", "[file]") {
  auto zero = read_file("/dev/zero", 1 << 20);
  REQUIRE(!zero.ok());
  CHECK(zero.error().message == "'/dev/zero' holds more than the limit of 1048576 bytes");
  auto null = read_file("/dev/null", 10);
  REQUIRE(null.ok());
  CHECK(null->empty());
}

TEST_CASE("read_file: a FIFO is read to its end, as a pipe", "[file]") {
  std::string fifo = temp_dir("fifo") + "/f";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] { write(fifo, "through a pipe"); });
  auto text = read_file(fifo, 100);
  writer.join();
  REQUIRE(text.ok());
  CHECK(*text == "through a pipe");
  std::thread long_writer([&] {
    std::ofstream out(fifo, std::ios::binary);
    out << std::string(5000, 'x');
  });
  auto over = read_file(fifo, 4096);
  long_writer.join();
  REQUIRE(!over.ok());
  CHECK(over.error().message == "'" + fifo + "' holds more than the limit of 4096 bytes");
}

TEST_CASE("allocations larger than the machine are errors that name the bytes", "[file]") {
  std::vector<double> v;
  Status s = resize_or_error(v, uint64_t{1} << 50, "the test");
  REQUIRE(!s.ok());
  CHECK(s.error().message.rfind("cannot allocate 9007199254740992 bytes (8.0 PiB) for the test: this machine has ",
                                0) == 0);
  CHECK(format_bytes(512) == "512 bytes");
  CHECK(format_bytes(3 << 20) == "3.0 MiB");
}

TEST_CASE("read_npy_file: directories, devices, short and long files", "[file][npy]") {
  std::string dir = temp_dir("npy");
  auto d = runtime::read_npy_file(dir);
  REQUIRE(!d.ok());
  CHECK(d.error().message == "cannot read '" + dir + "': it is a directory");
  auto zero = runtime::read_npy_file("/dev/zero");
  REQUIRE(!zero.ok());
  CHECK(zero.error().message == "/dev/zero: not a usable .npy file: it does not start with the .npy magic \\x93NUMPY");
  write(dir + "/ok.npy", npy_bytes());
  REQUIRE(runtime::read_npy_file(dir + "/ok.npy").ok());
  write(dir + "/long.npy", npy_bytes() + "xyz");
  auto trailing = runtime::read_npy_file(dir + "/long.npy");
  REQUIRE(!trailing.ok());
  CHECK(trailing.error().message == dir +
                                        "/long.npy: not a usable .npy file: it has trailing bytes: more data than the "
                                        "12 bytes its header says (the file is " +
                                        std::to_string(npy_bytes().size() + 3) + " bytes)");
  write(dir + "/short.npy", npy_bytes().substr(0, npy_bytes().size() - 1));
  auto truncated = runtime::read_npy_file(dir + "/short.npy");
  REQUIRE(!truncated.ok());
  CHECK(truncated.error().message ==
        dir + "/short.npy: not a usable .npy file: it is truncated: it holds 11 data bytes, the header says 12");
  // A header that claims 2^40 elements in a small file: memory grows with what is read,
  // not with what the header claims.
  std::string huge = npy_bytes();
  huge.replace(huge.find("(3,)"), 4, "(1099511627776,)");
  write(dir + "/huge.npy", huge);
  auto claimed = runtime::read_npy_file(dir + "/huge.npy");
  REQUIRE(!claimed.ok());
  CHECK(claimed.error().message.find("huge.npy: not a usable .npy file: it is truncated: it holds ") !=
        std::string::npos);
  CHECK(claimed.error().message.ends_with(" data bytes, the header says 4398046511104"));
}

TEST_CASE("safetensors files: round trip, devices, short and long files", "[file][safetensors]") {
  std::string dir = temp_dir("safetensors");
  std::vector<format::SafetensorsTensor> tensors = {{"w", "F32", {2}, std::vector<uint8_t>(8, 1)},
                                                    {"n", "I64", {}, std::vector<uint8_t>(8, 2)}};
  REQUIRE(format::write_safetensors_file(dir + "/w.safetensors", tensors).ok());
  auto back = format::read_safetensors_file(dir + "/w.safetensors");
  REQUIRE(back.ok());
  REQUIRE(back->size() == 2);
  CHECK((*back)[0].name == "w");
  CHECK((*back)[0].data == tensors[0].data);
  CHECK((*back)[1].shape.empty());
  std::string bytes = format::serialize_safetensors(tensors);
  CHECK(bytes.size() % 8 == 0);  // 8-byte header size + a header padded to 8 + 16 data bytes
  auto parsed = format::parse_safetensors(bytes, "w.safetensors");
  REQUIRE(parsed.ok());
  CHECK(parsed->size() == 2);

  auto zero = format::read_safetensors_file("/dev/zero");
  REQUIRE(!zero.ok());
  CHECK(zero.error().message == "/dev/zero: not a usable safetensors file: the header is not a JSON object");
  auto d = format::read_safetensors_file(dir);
  REQUIRE(!d.ok());
  CHECK(d.error().message == "cannot read '" + dir + "': it is a directory");
  write(dir + "/long.safetensors", bytes + "!");
  auto trailing = format::read_safetensors_file(dir + "/long.safetensors");
  REQUIRE(!trailing.ok());
  CHECK(
      trailing.error().message ==
      dir +
          "/long.safetensors: not a usable safetensors file: it has trailing bytes: more data follows the last tensor");
  CHECK(format::parse_safetensors(bytes + "!", "x").error().message ==
        "x: not a usable safetensors file: it has trailing bytes: 1 data bytes follow the last tensor");
  write(dir + "/short.safetensors", bytes.substr(0, bytes.size() - 1));
  auto truncated = format::read_safetensors_file(dir + "/short.safetensors");
  REQUIRE(!truncated.ok());
  CHECK(truncated.error().message == dir +
                                         "/short.safetensors: not a usable safetensors file: it is truncated: its "
                                         "tensors need 16 data bytes, it holds 15");
  // JSON nested a million deep: an error, not a stack overflow.
  std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  std::string nested(8, '\0');
  uint64_t size = deep.size();
  std::memcpy(nested.data(), &size, 8);
  CHECK(!format::parse_safetensors(nested + deep, "deep").ok());
}

TEST_CASE("artifact files: directories, devices, and files longer than their header", "[file][artifact]") {
  std::string dir = temp_dir("artifact");
  auto d = format::read_artifact_file(dir);
  REQUIRE(!d.ok());
  CHECK(d.error().message == "cannot read '" + dir + "': it is a directory");
  // /dev/zero is read only as far as its header: 64 bytes, which are no artifact.
  auto zero = format::read_artifact_file("/dev/zero");
  REQUIRE(zero.ok());
  CHECK(zero->size() == format::kHeaderBytes);
  CHECK(format::read_artifact(*zero).error().message == "artifact: bad magic: this is not a .kiln artifact");

  format::ArtifactContents contents;
  contents.target = "cpu-x86_64";
  std::vector<uint8_t> artifact = format::write_artifact(contents);
  REQUIRE(format::read_artifact(artifact).ok());
  write(dir + "/long.kiln", std::string(artifact.begin(), artifact.end()) + std::string(64, '\0'));
  auto trailing = format::read_artifact_file(dir + "/long.kiln");
  REQUIRE(!trailing.ok());
  CHECK(trailing.error().code == static_cast<int>(format::ArtifactErrorKind::TrailingBytes));
  CHECK(trailing.error().message == "artifact: trailing bytes: the file is " + std::to_string(artifact.size() + 64) +
                                        " bytes, its header says " + std::to_string(artifact.size()));
  std::vector<uint8_t> longer = artifact;
  longer.resize(artifact.size() + 64, 0);
  CHECK(format::read_artifact(longer).error().message ==
        "artifact: trailing bytes: the file is " + std::to_string(longer.size()) + " bytes, its header says " +
            std::to_string(artifact.size()));
  write(dir + "/short.kiln", std::string(artifact.begin(), artifact.end() - 1));
  auto shorter = format::read_artifact_file(dir + "/short.kiln");
  REQUIRE(shorter.ok());
  CHECK(format::read_artifact(*shorter).error().code == static_cast<int>(format::ArtifactErrorKind::Truncated));
}
