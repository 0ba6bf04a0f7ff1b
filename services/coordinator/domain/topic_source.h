#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace conduit::coordinator {

struct PartitionMarks {
  int32_t partition = 0;
  int64_t log_start = 0;
  int64_t high_watermark = 0;
  // Append time of the first retained record; unset when the partition is empty.
  std::optional<absl::Time> oldest_append_time;
};

// What the coordinator needs to know about topics: the log broker's view. Implemented over gRPC
// (broker/grpc_topic_source.h); tests of domain rules use a fake. Calls may block; the
// coordinator never makes them under a group's mutex. Thread-safe.
class TopicSource {
 public:
  virtual ~TopicSource() = default;

  using MarksCallback = std::function<void(absl::StatusOr<std::vector<PartitionMarks>>)>;

  // Every partition of `topic`, in order. NOT_FOUND for an unknown topic.
  virtual absl::StatusOr<std::vector<PartitionMarks>> Describe(const std::string& topic) = 0;
  // The same without blocking the caller: `done` runs when the answer arrives (on another
  // thread, or inline). By default it asks Describe inline.
  virtual void DescribeAsync(const std::string& topic, MarksCallback done) {
    done(Describe(topic));
  }
  // The first offset whose append time is >= at (the high watermark if none).
  virtual absl::StatusOr<int64_t> OffsetForTime(const std::string& topic, int32_t partition,
                                                absl::Time at) = 0;
  // The append time of the first record at or after `offset`; unset when there is none.
  virtual absl::StatusOr<std::optional<absl::Time>> AppendTimeAt(const std::string& topic,
                                                                 int32_t partition,
                                                                 int64_t offset) = 0;
};

}  // namespace conduit::coordinator
