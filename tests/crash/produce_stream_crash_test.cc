// SIGKILL a conduit-broker while callers stream one record per message on ProduceStream (sync
// durability), restart it on the same data directory, and check what a streamed answer
// promises: every record answered OK is present at the answered offset, in a dense log. A
// process crash cannot lose an acknowledged record under either durability, so there is no
// negative control here (the power-loss tests show the loss of unsynced writes).
//
// Cycles: 3 by default; CONDUIT_CRASH_CYCLES=N for more.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "tests/crash/log_durability.h"
#include "tests/support/log_client.h"
#include "tests/support/server_process.h"

namespace conduit::testing {
namespace {

constexpr int kStreams = 2;

// One caller: writes one-record messages until the stream breaks, and records each answered
// record in `acked`. Returns the records answered OK.
int64_t StreamUntilKilled(LogClient& client, int stream_id, int cycle, Acked& acked) {
  grpc::ClientContext ctx;
  auto stream = client.stub()->ProduceStream(&ctx);
  std::mutex mu;
  std::vector<std::string> sent;  // value of message n
  std::thread writer([&] {
    for (int64_t n = 0;; ++n) {
      logpb::ProduceStreamRequest message;
      message.set_sequence(n);
      message.mutable_request()->set_topic(kTopic);
      auto* record = message.mutable_request()->add_records();
      record->set_partition(static_cast<int32_t>(n % kPartitions));
      record->set_value(absl::StrCat("c", cycle, "-s", stream_id, "-n", n));
      {
        std::lock_guard<std::mutex> lock(mu);
        sent.push_back(record->value());
      }
      if (!stream->Write(message)) return;  // killed
    }
  });
  int64_t answered = 0;
  logpb::ProduceStreamResponse response;
  int64_t n = 0;
  while (stream->Read(&response)) {
    for (const auto& answer : response.answers()) {
      EXPECT_EQ(answer.sequence(), n) << "answers in message order";
      std::string value;
      {
        std::lock_guard<std::mutex> lock(mu);
        value = sent.at(n++);
      }
      if (answer.code() != 0) continue;
      const auto& pos = answer.positions(0);
      std::lock_guard<std::mutex> lock(acked.mu);
      auto [it, inserted] =
          acked.records.emplace(std::make_pair(pos.partition(), pos.offset()), value);
      EXPECT_TRUE(inserted) << "offset answered twice: partition " << pos.partition() << " offset "
                            << pos.offset();
      ++answered;
    }
  }
  ctx.TryCancel();
  writer.join();
  (void)stream->Finish();
  return answered;
}

TEST(ProduceStreamCrash, EveryAnsweredRecordSurvivesSigkillAtItsOffset) {
  ASSERT_NE(std::getenv("CONDUIT_BIN_DIR"), nullptr) << "CONDUIT_BIN_DIR is set by CTest";
  TempDir dir;
  const std::string data = dir.Sub("data");
  Acked acked;
  std::mt19937 rng(20261202);
  for (int cycle = 0; cycle < Cycles(); ++cycle) {
    ServerProcess broker(BrokerBinary(), data, dir.path());
    ASSERT_TRUE(broker.running()) << "broker did not start; see " << dir.path() << "/server.log";
    LogClient client(broker.address());
    if (cycle == 0)
      ASSERT_TRUE(client.CreateTopic(kTopic, kPartitions, logpb::DURABILITY_SYNC).ok());
    ASSERT_GE(VerifyLog(client, acked), 0);
    std::atomic<int64_t> answered{0};
    std::vector<std::thread> callers;
    for (int s = 0; s < kStreams; ++s) {
      callers.emplace_back([&, s] {
        LogClient own(broker.address());
        answered += StreamUntilKilled(own, s, cycle, acked);
      });
    }
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(300, 900)(rng)));
    broker.Kill(SIGKILL);
    for (auto& c : callers) c.join();
    EXPECT_GT(answered.load(), 0) << "cycle " << cycle << " answered nothing";
  }
  ServerProcess broker(BrokerBinary(), data, dir.path());
  ASSERT_TRUE(broker.running());
  LogClient client(broker.address());
  const int64_t present = VerifyLog(client, acked);
  std::lock_guard<std::mutex> lock(acked.mu);
  EXPECT_GE(present, static_cast<int64_t>(acked.records.size()));
  std::printf("stream crash cycles: %d, records answered: %zu, records present: %lld\n", Cycles(),
              acked.records.size(), static_cast<long long>(present));
}

}  // namespace
}  // namespace conduit::testing
