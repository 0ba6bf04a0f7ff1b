// The data volume fills up under a running conduit-standalone (a size-limited tmpfs, so the
// disk is really full, not simulated): changes are refused with RESOURCE_EXHAUSTED "disk full",
// reads keep working, and once space is freed writes resume without a restart. After a SIGKILL
// and restart, everything acknowledged before, during and after is still there.
//
// Needs root (to mount the tmpfs); skipped with a message otherwise.

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "common/rocksdb/space_guard.h"
#include "common/testing/temp_dir.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/support/coordinator_client.h"
#include "tests/support/log_client.h"
#include "tests/support/server_process.h"

namespace conduit::testing {
namespace {

namespace qpb = ::conduit::queue::v1;

constexpr int64_t kVolumeMiB = 256;
constexpr int64_t kReserveMiB = 64;  // --min_free_disk_mb

// A tmpfs of kVolumeMiB mounted on a fresh directory, unmounted on destruction.
class SmallVolume {
 public:
  SmallVolume() : path_(dir_.Sub("volume")) {
    ::mkdir(path_.c_str(), 0755);
    const std::string options = "size=" + std::to_string(kVolumeMiB) + "m";
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      error_ = std::strerror(errno);
    }
  }
  ~SmallVolume() {
    if (error_.empty()) ::umount2(path_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  const std::string& work() const { return dir_.path(); }

  static int64_t FreeBytes(const std::string& path) {
    struct statvfs st;
    if (::statvfs(path.c_str(), &st) != 0) return -1;
    return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  }

  // Takes space with a file until `free_bytes` are left.
  bool FillUntil(int64_t free_bytes) {
    const int64_t take = FreeBytes(path_) - free_bytes;
    if (take <= 0) return true;
    const int fd = ::open(Filler().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return false;
    const bool ok = ::posix_fallocate(fd, 0, take) == 0;
    ::close(fd);
    return ok;
  }
  void Free() { ::unlink(Filler().c_str()); }

 private:
  std::string Filler() const { return path_ + "/filler"; }
  TempDir dir_;
  std::string path_;
  std::string error_;
};

std::chrono::system_clock::time_point Deadline(absl::Duration d = absl::Seconds(5)) {
  return absl::ToChronoTime(absl::Now() + d);
}

// One WorkQueue call with a deadline.
template <typename Method, typename Req, typename Resp>
grpc::Status QueueCall(qpb::WorkQueue::Stub* stub, Method method, const Req& req, Resp* resp,
                       absl::Duration deadline = absl::Seconds(5)) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(deadline));
  return (stub->*method)(&ctx, req, resp);
}

class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!volume_.error().empty()) {
      GTEST_SKIP() << "cannot mount a tmpfs (" << volume_.error() << "); needs root";
    }
    const char* bin_dir = std::getenv("CONDUIT_BIN_DIR");
    ASSERT_NE(bin_dir, nullptr);
    binary_ = std::string(bin_dir) + "/conduit-standalone";
  }

  std::unique_ptr<ServerProcess> Start() {
    auto server = std::make_unique<ServerProcess>(
        binary_, volume_.path() + "/data", volume_.work(),
        std::vector<std::string>{"--min_free_disk_mb", std::to_string(kReserveMiB)});
    if (!server->running()) ADD_FAILURE() << "see " << volume_.work() << "/server.log";
    return server;
  }

  grpc::Status Produce(LogClient& log, const std::string& value,
                       absl::Duration deadline = absl::Seconds(5)) {
    logpb::ProduceRequest req;
    req.set_topic("events");
    AddRecord(&req, value);
    logpb::ProduceResponse resp;
    grpc::Status s = log.Produce(req, &resp, deadline);
    if (s.ok()) acked_records_.insert(value);
    return s;
  }

  grpc::Status Enqueue(qpb::WorkQueue::Stub* queue, const std::string& payload,
                       absl::Duration deadline = absl::Seconds(5)) {
    qpb::EnqueueRequest req;
    req.set_queue("jobs");
    req.add_jobs()->set_payload(payload);
    qpb::EnqueueResponse resp;
    grpc::Status s = QueueCall(queue, &qpb::WorkQueue::Stub::Enqueue, req, &resp, deadline);
    if (s.ok()) acked_jobs_.insert(payload);
    return s;
  }

  grpc::Status Commit(CoordinatorClient& groups, int64_t offset,
                      absl::Duration deadline = absl::Seconds(5)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(deadline));
    cpb::CommitOffsetsRequest req;
    req.set_group_id("readers");
    req.set_member_epoch(-1);
    auto* p = req.add_topics();
    p->set_topic("events");
    p->add_partitions()->set_offset(offset);
    cpb::CommitOffsetsResponse resp;
    grpc::Status s = groups.stub()->CommitOffsets(&ctx, req, &resp);
    if (s.ok()) acked_offset_ = offset;
    return s;
  }

  // Everything acknowledged is there: records in the log, jobs in the queue (counted, or leased
  // to compare payloads: a lease is a change), the offset.
  void ExpectAcknowledgedPresent(LogClient& log, qpb::WorkQueue::Stub* queue,
                                 CoordinatorClient& groups, bool lease) {
    std::vector<logpb::Record> records;
    ASSERT_TRUE(log.FetchAll("events", 0, &records).ok());
    std::set<std::string> values;
    for (const auto& r : records) values.insert(r.value());
    for (const std::string& v : acked_records_) EXPECT_TRUE(values.count(v)) << "lost record " << v;

    if (!lease) {
      qpb::GetQueueStatsRequest req;
      req.set_queue("jobs");
      qpb::GetQueueStatsResponse stats;
      ASSERT_TRUE(QueueCall(queue, &qpb::WorkQueue::Stub::GetQueueStats, req, &stats).ok());
      EXPECT_GE(stats.ready(), static_cast<int64_t>(acked_jobs_.size()));
    }
    qpb::LeaseRequest lease_req;
    lease_req.set_queue("jobs");
    lease_req.set_worker_id("check");
    lease_req.set_max_jobs(1000);
    qpb::LeaseResponse leased;
    if (lease) {
      ASSERT_TRUE(QueueCall(queue, &qpb::WorkQueue::Stub::Lease, lease_req, &leased).ok());
      std::set<std::string> payloads;
      for (const auto& j : leased.jobs()) payloads.insert(j.payload());
      for (const std::string& p : acked_jobs_) {
        EXPECT_TRUE(payloads.count(p)) << "lost job " << p;
      }
    }

    cpb::FetchOffsetsResponse offsets;
    ASSERT_TRUE(groups.FetchOffsets("readers", &offsets).ok());
    ASSERT_EQ(offsets.offsets_size(), 1);
    EXPECT_GE(offsets.offsets(0).offset(), acked_offset_) << "lost a committed offset";
  }

  SmallVolume volume_;
  std::string binary_;
  std::set<std::string> acked_records_, acked_jobs_;
  int64_t acked_offset_ = 0;
};

bool IsDiskFull(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         s.error_message().find("disk full") != std::string::npos;
}

TEST_F(FullDiskTest, WritesAreRefusedWhileFullReadsGoOnAndWritesResumeWhenSpaceIsFreed) {
  auto server = Start();
  ASSERT_TRUE(server->running());
  LogClient log(server->address());
  CoordinatorClient groups(server->address());
  auto queue = qpb::WorkQueue::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(log.CreateTopic("events", 1).ok());
  qpb::CreateQueueRequest create;
  create.set_name("jobs");
  qpb::CreateQueueResponse created;
  ASSERT_TRUE(QueueCall(queue.get(), &qpb::WorkQueue::Stub::CreateQueue, create, &created).ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(Produce(log, "before-" + std::to_string(i)).ok());
  ASSERT_TRUE(Enqueue(queue.get(), "job-before").ok());
  ASSERT_TRUE(Commit(groups, 50).ok());

  // Fill the volume to half the reserve: RocksDB itself still has room, Conduit refuses.
  ASSERT_TRUE(volume_.FillUntil((kReserveMiB << 20) / 2));
  // A reading with room to spare is trusted this long (the server's last one had plenty).
  absl::SleepFor(rocksdb_util::SpaceGuard::kRereadAfter + absl::Milliseconds(20));

  grpc::Status produce = Produce(log, "during");
  EXPECT_TRUE(IsDiskFull(produce)) << produce.error_code() << " " << produce.error_message();
  EXPECT_TRUE(IsDiskFull(log.CreateTopic("another", 1)));
  // The queue and the coordinator refuse a change before they make it.
  grpc::Status refused = Enqueue(queue.get(), "job-during");
  EXPECT_TRUE(IsDiskFull(refused)) << refused.error_code() << " " << refused.error_message();
  grpc::Status commit = Commit(groups, 70);
  EXPECT_TRUE(IsDiskFull(commit)) << commit.error_code() << " " << commit.error_message();

  // Reads keep working.
  ExpectAcknowledgedPresent(log, queue.get(), groups, /*lease=*/false);

  // Space is freed: writes resume by themselves.
  volume_.Free();
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  grpc::Status resumed;
  do {
    resumed = Produce(log, "after");
    if (!resumed.ok()) absl::SleepFor(absl::Milliseconds(100));  // the server's retry period
  } while (!resumed.ok() && absl::Now() < give_up);
  ASSERT_TRUE(resumed.ok()) << resumed.error_message();
  grpc::Status enqueued;
  do {
    enqueued = Enqueue(queue.get(), "job-after");
    if (!enqueued.ok()) absl::SleepFor(absl::Milliseconds(100));
  } while (!enqueued.ok() && absl::Now() < give_up);
  ASSERT_TRUE(enqueued.ok()) << enqueued.error_message();
  ASSERT_TRUE(Commit(groups, 90).ok());
  ASSERT_TRUE(log.CreateTopic("another", 1).ok());

  // Nothing acknowledged is lost across a SIGKILL either.
  server->Kill(SIGKILL);
  server = Start();
  ASSERT_TRUE(server->running());
  LogClient log2(server->address());
  CoordinatorClient groups2(server->address());
  auto queue2 = qpb::WorkQueue::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  ExpectAcknowledgedPresent(log2, queue2.get(), groups2, /*lease=*/true);
  EXPECT_EQ(acked_records_.size(), 101u);
  EXPECT_EQ(acked_jobs_.size(), 2u);
  server->Kill(SIGTERM);
}

}  // namespace
}  // namespace conduit::testing
