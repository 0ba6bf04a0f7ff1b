#pragma once

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/coordinator/domain/topic_source.h"

namespace conduit::coordinator {

// TopicSource over the log broker's gRPC API (conduit.log.v1.LogService). The channel is made
// on first use, so that conduit-standalone can point it at its own address once it is serving.
// Every call has a deadline; failures come back as the broker's status (UNAVAILABLE when it
// cannot be reached). Thread-safe.
class GrpcTopicSource final : public TopicSource {
 public:
  // `address` is host:port, or empty until SetAddress.
  explicit GrpcTopicSource(std::string address, absl::Duration deadline = absl::Seconds(3));

  void SetAddress(const std::string& address);

  absl::StatusOr<std::vector<PartitionMarks>> Describe(const std::string& topic) override;
  // Over gRPC's callback API: `done` runs on a gRPC thread when the broker answers.
  void DescribeAsync(const std::string& topic, MarksCallback done) override;
  absl::StatusOr<int64_t> OffsetForTime(const std::string& topic, int32_t partition,
                                        absl::Time at) override;
  absl::StatusOr<std::optional<absl::Time>> AppendTimeAt(const std::string& topic,
                                                         int32_t partition,
                                                         int64_t offset) override;

 private:
  absl::StatusOr<std::shared_ptr<conduit::log::v1::LogService::Stub>> Stub();
  void SetDeadline(grpc::ClientContext* ctx) const;

  const absl::Duration deadline_;
  absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<conduit::log::v1::LogService::Stub> stub_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::coordinator
