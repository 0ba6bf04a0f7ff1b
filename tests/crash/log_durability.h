#pragma once

// What the broker's SIGKILL tests share (broker_crash_test.cc, produce_stream_crash_test.cc):
// the records acknowledged so far, the check that each is at its acknowledged offset in a dense
// log, the cycle count and the broker binary.

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/log_client.h"

namespace conduit::testing {

inline constexpr int kPartitions = 4;
inline constexpr char kTopic[] = "crash";

struct Acked {
  std::mutex mu;
  std::map<std::pair<int, int64_t>, std::string> records;  // (partition, offset) → value
};

// Checks every acked record and the density of every partition. Returns records present.
inline int64_t VerifyLog(LogClient& client, Acked& acked) {
  int64_t present = 0;
  std::map<int, std::vector<logpb::Record>> stored;
  for (int p = 0; p < kPartitions; ++p) {
    grpc::Status status = client.FetchAll(kTopic, p, &stored[p]);
    EXPECT_TRUE(status.ok()) << status.error_message();
    for (size_t i = 0; i < stored[p].size(); ++i) {
      EXPECT_EQ(stored[p][i].offset(), static_cast<int64_t>(i)) << "gap in partition " << p;
      if (stored[p][i].offset() != static_cast<int64_t>(i)) return -1;
    }
    present += static_cast<int64_t>(stored[p].size());
  }
  std::lock_guard<std::mutex> lock(acked.mu);
  for (const auto& [position, value] : acked.records) {
    const auto& records = stored[position.first];
    if (position.second >= static_cast<int64_t>(records.size())) {
      ADD_FAILURE() << "acked record lost: partition " << position.first << " offset "
                    << position.second;
      continue;
    }
    EXPECT_EQ(records[position.second].value(), value)
        << "partition " << position.first << " offset " << position.second;
  }
  return present;
}

inline int Cycles() {
  const char* cycles_env = std::getenv("CONDUIT_CRASH_CYCLES");
  return cycles_env ? std::atoi(cycles_env) : 3;
}

inline std::string BrokerBinary() {
  const char* bin_dir = std::getenv("CONDUIT_BIN_DIR");
  return std::string(bin_dir ? bin_dir : ".") + "/conduit-broker";
}

}  // namespace conduit::testing
