// SIGKILL a conduit-broker process under sync produce load, restart it on the same data
// directory, and check the durability contract: every acknowledged record is present at the
// offset it was acknowledged with, and every partition's offsets are dense (no gaps).
//
// Cycles: 3 by default; CONDUIT_CRASH_CYCLES=N for more (e.g. 50 in a soak run).

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "tests/support/log_client.h"

extern char** environ;

namespace conduit::testing {
namespace {

constexpr int kPartitions = 4;
constexpr int kProducers = 8;
constexpr char kTopic[] = "crash";

// A conduit-broker child process. The destructor SIGKILLs it if still running.
class BrokerProcess {
 public:
  BrokerProcess(const std::string& binary, const std::string& data_dir, const std::string& work) {
    const std::string port_file = work + "/port";
    std::remove(port_file.c_str());
    std::vector<std::string> args = {binary,           "--data-dir",  data_dir,
                                     "--listen",       "127.0.0.1:0", "--metrics-listen",
                                     "",               "--port-file", port_file,
                                     "--log-level",    "warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = work + "/broker.log";
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      return;
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      std::ifstream in(port_file);
      int port = 0;
      if (in >> port && port > 0) {
        address_ = absl::StrCat("127.0.0.1:", port);
        return;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      absl::SleepFor(absl::Milliseconds(20));  // waiting for a child process to bind
    }
  }
  ~BrokerProcess() { Kill(SIGKILL); }

  bool running() const { return pid_ > 0 && !address_.empty(); }
  const std::string& address() const { return address_; }

  // Sends `signal` and reaps the process; returns its wait status.
  int Kill(int signal) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

struct Acked {
  std::mutex mu;
  std::map<std::pair<int, int64_t>, std::string> records;  // (partition, offset) → value
};

// Checks every acked record and the density of every partition. Returns records present.
int64_t VerifyLog(LogClient& client, Acked& acked) {
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

TEST(BrokerCrash, AcknowledgedRecordsSurviveSigkill) {
  const char* bin_dir = std::getenv("CONDUIT_BIN_DIR");
  ASSERT_NE(bin_dir, nullptr) << "CONDUIT_BIN_DIR is set by CTest";
  const std::string binary = std::string(bin_dir) + "/conduit-broker";
  const char* cycles_env = std::getenv("CONDUIT_CRASH_CYCLES");
  const int cycles = cycles_env ? std::atoi(cycles_env) : 3;
  TempDir dir;
  const std::string data = dir.Sub("data");
  Acked acked;
  std::mt19937 rng(20261129);

  for (int cycle = 0; cycle < cycles; ++cycle) {
    BrokerProcess broker(binary, data, dir.path());
    ASSERT_TRUE(broker.running()) << "broker did not start; see " << dir.path() << "/broker.log";
    LogClient client(broker.address());
    if (cycle == 0) {
      ASSERT_TRUE(client.CreateTopic(kTopic, kPartitions).ok());
    }
    const int64_t present = VerifyLog(client, acked);
    ASSERT_GE(present, 0);

    std::atomic<bool> stop{false};
    std::atomic<int64_t> acked_this_cycle{0};
    std::vector<std::thread> producers;
    for (int t = 0; t < kProducers; ++t) {
      producers.emplace_back([&, t] {
        LogClient own(broker.address());
        for (int seq = 0; !stop.load(); ++seq) {
          logpb::ProduceRequest request;
          request.set_topic(kTopic);
          const int n = 1 + (seq % 5);
          for (int i = 0; i < n; ++i) {
            std::string key = absl::StrCat("key-", t, "-", (seq + i) % 17);
            AddRecord(&request, absl::StrCat("c", cycle, "-t", t, "-s", seq, "-i", i), &key);
          }
          logpb::ProduceResponse response;
          if (!own.Produce(request, &response, absl::Seconds(5)).ok()) break;  // killed
          std::lock_guard<std::mutex> lock(acked.mu);
          for (int i = 0; i < response.positions_size(); ++i) {
            const auto& pos = response.positions(i);
            auto [it, inserted] =
                acked.records.emplace(std::make_pair(pos.partition(), pos.offset()),
                                      request.records(i).value());
            EXPECT_TRUE(inserted) << "offset acked twice: partition " << pos.partition()
                                  << " offset " << pos.offset();
          }
          acked_this_cycle += response.positions_size();
        }
      });
    }
    // Let load build up, then kill at a random moment.
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(300, 900)(rng)));
    broker.Kill(SIGKILL);
    stop.store(true);
    for (auto& p : producers) p.join();
    EXPECT_GT(acked_this_cycle.load(), 0) << "cycle " << cycle << " acknowledged nothing";
  }

  BrokerProcess broker(binary, data, dir.path());
  ASSERT_TRUE(broker.running());
  LogClient client(broker.address());
  const int64_t present = VerifyLog(client, acked);
  std::lock_guard<std::mutex> lock(acked.mu);
  EXPECT_GE(present, static_cast<int64_t>(acked.records.size()));
  std::printf("crash cycles: %d, records acked: %zu, records present: %lld\n", cycles,
              acked.records.size(), static_cast<long long>(present));
  const int status = broker.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "clean shutdown on SIGTERM";
}

}  // namespace
}  // namespace conduit::testing
