// Reading an artifact file as far as its header says, and no further.
#include <cstring>

#include "base/file.h"
#include "runtime/format/artifact.h"

namespace kiln::format {

Result<std::vector<uint8_t>> read_artifact_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  std::vector<uint8_t> bytes;
  KILN_RETURN_IF_ERROR(file.read(bytes, kHeaderBytes));
  // A short or foreign file goes to read_artifact as it is, which says what it is not.
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) return bytes;
  uint64_t declared = 0;
  std::memcpy(&declared, bytes.data() + 16, sizeof declared);
  if (declared < kHeaderBytes) return bytes;
  if (declared > kHeaderBytes) KILN_RETURN_IF_ERROR(file.read(bytes, declared - kHeaderBytes));
  if (bytes.size() < declared) return bytes;  // truncated: read_artifact words it
  KILN_ASSIGN_OR_RETURN(bool end, file.at_end());
  if (!end) {
    const std::string size =
        file.reported_size() ? std::to_string(*file.reported_size()) + " bytes" : "longer than that";
    return Error{"artifact: trailing bytes: the file is " + size + ", its header says " + std::to_string(declared),
                 static_cast<int>(ArtifactErrorKind::TrailingBytes)};
  }
  return bytes;
}

}  // namespace kiln::format
