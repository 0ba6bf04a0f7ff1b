#include "common/rocksdb/space_guard.h"

#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(int64_t, min_free_disk_mb, 128,
          "Changes are refused (RESOURCE_EXHAUSTED, disk full) while the data volume has less free "
          "space than this many MiB; reads go on, and writes resume once space is freed. 0: never");

namespace conduit::rocksdb_util {

int64_t MinFreeDiskBytes() { return absl::GetFlag(FLAGS_min_free_disk_mb) << 20; }

std::optional<int64_t> SpaceGuard::ReadFreeSpace(const std::string& path) {
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(path, ec);
  if (ec) return std::nullopt;
  return static_cast<int64_t>(space.available);
}

absl::Status SpaceGuard::Check() const {
  if (min_free_bytes_ <= 0) return absl::OkStatus();
  if (absl::ToInt64Nanoseconds(clock_->Monotonic()) <
      trusted_until_ns_.load(std::memory_order_relaxed)) {
    return absl::OkStatus();
  }
  const std::optional<int64_t> free = read_(path_);
  if (!free) return absl::OkStatus();  // RocksDB's own error, if any, will say more
  if (*free >= 2 * min_free_bytes_) {
    trusted_until_ns_.store(absl::ToInt64Nanoseconds(clock_->Monotonic() + kRereadAfter),
                            std::memory_order_relaxed);
    return absl::OkStatus();
  }
  if (*free >= min_free_bytes_) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("disk full: the data volume of ", path_, " has ", *free >> 20,
                   " MiB free, below the reserve of ", min_free_bytes_ >> 20,
                   " MiB (--min_free_disk_mb); writes resume once space is freed"));
}

}  // namespace conduit::rocksdb_util
