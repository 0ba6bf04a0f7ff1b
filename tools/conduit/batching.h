#pragma once

// Bulk input of the CLI, shared by `conduit produce` and `conduit queue enqueue`: lines from
// --file or stdin, cut into requests bounded by records and bytes, with a progress line on
// stderr for long inputs.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace conduit::cli {

// `file` opened into `*storage`, or std::cin when `file` is empty; nullptr when `file` cannot be
// read.
std::istream* OpenInput(const std::string& file, std::ifstream* storage);

// How large one request built from many items may grow. The defaults keep a request (and its
// answer) far below gRPC's 4 MiB default message limit, also when one item is itself 1 MiB (the
// work queue's largest payload).
struct BatchLimits {
  size_t max_records = 1000;
  size_t max_bytes = 1 << 20;
};

// Decides where a sequence of items is cut into batches: a batch ends before the item that would
// take it past `max_records` items or `max_bytes` bytes; an item larger than `max_bytes` goes
// alone. It counts only; the caller keeps the items. Not thread-safe.
class BatchCutter {
 public:
  explicit BatchCutter(BatchLimits limits) : limits_(limits) {}

  // True when the open batch holds something and an item of `bytes` would take it past a limit:
  // send the batch, then Reset, then Add the item.
  bool Full(size_t bytes) const {
    return records_ > 0 &&
           (records_ >= limits_.max_records || bytes_ + bytes > limits_.max_bytes);
  }
  void Add(size_t bytes) {
    ++records_;
    bytes_ += bytes;
  }
  void Reset() { records_ = bytes_ = 0; }
  size_t records() const { return records_; }

 private:
  const BatchLimits limits_;
  size_t records_ = 0;
  size_t bytes_ = 0;
};

// The progress line of a long input: at most once a second, "\rsent N <noun> (R/s)" on stderr
// (stdout stays the command's output); Finish ends the line. Starts its clock when constructed.
// Not thread-safe: the reading loop owns it.
class Progress {
 public:
  explicit Progress(std::string noun);

  // Counts `n` more items sent; rewrites the line when a second has passed since the last time.
  void Add(int64_t n);
  int64_t sent() const { return sent_; }
  // Ends the line with a newline when one was printed; the seconds since construction (> 0),
  // for the summary.
  double Finish();

 private:
  const std::string noun_;
  const absl::Time start_;
  absl::Time next_print_;
  int64_t sent_ = 0;
  bool printed_ = false;
};

}  // namespace conduit::cli
