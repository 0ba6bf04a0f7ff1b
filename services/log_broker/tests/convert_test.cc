// The produce path's own time check (CheckRecordTimes) against the generic one it stands in for.

#include "services/log_broker/api/convert.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/grpc/request_checks.h"

namespace conduit::log_broker::api {
namespace {

// CheckRecordTimes reads records[].event_time only. Should ProduceRequest gain another
// Timestamp or Duration (or ProduceRecord a second one), this fails: extend CheckRecordTimes,
// or the new field would reach the broker unchecked.
TEST(CheckRecordTimes, CoversEveryTimeFieldOfAProduceRequest) {
  EXPECT_EQ(grpc_util::TimeFieldPaths(pb::ProduceRequest::descriptor()),
            std::vector<std::string>{"records.event_time"});
}

TEST(CheckRecordTimes, AnswersAsTheGenericCheckDoes) {
  struct Case {
    int64_t seconds;
    int32_t nanos;
  };
  for (const Case& c : std::vector<Case>{{0, 0},
                                         {grpc_util::kMinTimestampSeconds, 0},
                                         {grpc_util::kMaxTimestampSeconds, 999'999'999},
                                         {grpc_util::kMaxTimestampSeconds + 1, 0},  // year 10000
                                         {grpc_util::kMinTimestampSeconds - 1, 0},
                                         {1, -1},
                                         {1, 1'000'000'000}}) {
    pb::ProduceRequest request;
    request.add_records()->set_value("no time");
    request.add_records()->mutable_event_time()->set_seconds(1'700'000'000);
    auto* time = request.add_records()->mutable_event_time();
    time->set_seconds(c.seconds);
    time->set_nanos(c.nanos);
    const absl::Status generic = grpc_util::CheckTimeFields(request);
    const absl::Status own = CheckRecordTimes(request);
    EXPECT_EQ(own, generic) << c.seconds << " s " << c.nanos << " ns";
    if (!own.ok()) {
      EXPECT_EQ(own.message().substr(0, 22), "records[2].event_time ") << own;
    }
  }
}

}  // namespace
}  // namespace conduit::log_broker::api
