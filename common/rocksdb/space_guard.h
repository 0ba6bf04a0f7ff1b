#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace conduit::rocksdb_util {

// The reserve of free space a data volume keeps: --min_free_disk_mb, in bytes (0: none).
int64_t MinFreeDiskBytes();

// Refuses writes while the volume holding `path` has less free space than the reserve, so that
// RocksDB itself never meets ENOSPC. That matters: a WAL append that fails for space leaves
// RocksDB 7.8 unable to go on without a reopen (its WAL writer keeps the error; Debian's build
// even asserts on the next sync), while a write refused here changes nothing and can simply be
// tried again once space is freed. The reserve leaves RocksDB room to flush memtables, roll the
// WAL and run the compactions that free space after deletes. Thread-safe (stateless).
class SpaceGuard {
 public:
  explicit SpaceGuard(std::string path, int64_t min_free_bytes = MinFreeDiskBytes())
      : path_(std::move(path)), min_free_bytes_(min_free_bytes) {}

  // OK, or RESOURCE_EXHAUSTED "disk full: ..." naming the free space and the reserve
  // (commit::IsDiskFull). A volume whose free space cannot be read is not refused.
  absl::Status Check() const;

 private:
  std::string path_;
  int64_t min_free_bytes_;
};

}  // namespace conduit::rocksdb_util
