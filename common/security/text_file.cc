#include "common/security/text_file.h"

#include <cerrno>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"

namespace conduit::security {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

absl::Status ErrnoStatus(int error, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " '", path, "' cannot be read"));
}

}  // namespace

absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) return ErrnoStatus(errno, what, path);
  std::string content;
  char buffer[1 << 14];
  while (true) {
    const size_t n = std::fread(buffer, 1, sizeof(buffer), file.get());
    content.append(buffer, n);
    if (content.size() > kMaxTextFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", path, "' is larger than ", kMaxTextFileBytes, " bytes"));
    }
    if (n < sizeof(buffer)) break;
  }
  if (std::ferror(file.get())) return ErrnoStatus(errno, what, path);
  return content;
}

}  // namespace conduit::security
