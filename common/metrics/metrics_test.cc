// /metrics over plain HTTP (GET and HEAD), the process and storage collectors, build info.
#include "common/metrics/metrics.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "common/metrics/http_exposer.h"
#include "common/metrics/process_metrics.h"
#include "common/testing/temp_dir.h"
#include "tests/support/http_metrics.h"

namespace conduit::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Sends `request` to 127.0.0.1:port and returns the whole answer.
std::string Exchange(int port, const std::string& request) {
  const int fd = conduit::testing::ConnectLoopback(port, /*receive_timeout_seconds=*/5);
  if (fd < 0) return "";
  std::string out;
  if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buf[8192];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, n);
  }
  ::close(fd);
  return out;
}

// The value of the first sample line of `text` matching `series` (a regex), or -1.
double Sample(const std::string& text, const std::string& series) {
  std::smatch m;
  const std::regex line("(?:^|\n)" + series + " ([-+0-9.e]+)");
  return std::regex_search(text, m, line) ? std::stod(m[1]) : -1;
}

TEST(HttpExposerTest, AnswersGetAndHeadWithTheSameHeaders) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("conduit_test_total")
      .Help("h")
      .Register(*registry)
      .Add({})
      .Increment(3);
  auto exposer = HttpExposer::Start("127.0.0.1:0", registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();

  const std::string get = Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(get, HasSubstr("200 OK"));
  EXPECT_THAT(get, HasSubstr("conduit_test_total 3"));
  const std::string head = Exchange(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(head, HasSubstr("200 OK"));
  EXPECT_THAT(head, HasSubstr(kExpositionContentType));
  EXPECT_THAT(head, Not(HasSubstr("conduit_test_total")));  // headers only
  // Both announce the body GET sends.
  std::smatch m;
  const std::regex length("Content-Length: ([0-9]+)");
  ASSERT_TRUE(std::regex_search(head, m, length)) << head;
  const size_t announced = std::stoul(m[1]);
  EXPECT_EQ(get.size() - get.find("\r\n\r\n") - 4, announced);

  EXPECT_THAT(Exchange(port, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n"), HasSubstr("404"));
}

TEST(HttpExposerTest, APortInUseIsUnavailable) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto first = HttpExposer::Start("127.0.0.1:0", registry);
  ASSERT_TRUE(first.ok());
  auto second = HttpExposer::Start("127.0.0.1:" + std::to_string((*first)->port()), registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(ProcessCollectorTest, ReportsThisProcess) {
  const std::string before = ExpositionText(ProcessCollector());
  EXPECT_GT(Sample(before, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(Sample(before, "process_virtual_memory_bytes"),
            Sample(before, "process_resident_memory_bytes"));
  EXPECT_GE(Sample(before, "process_cpu_seconds_total"), 0);
  EXPECT_GE(Sample(before, "process_threads"), 1);
  EXPECT_GT(Sample(before, "process_max_fds"), 0);
  // Started within the last day and not in the future.
  const double start = Sample(before, "process_start_time_seconds");
  const double now = absl::ToUnixSeconds(absl::Now());
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 86400);

  // Ten more open files are seen.
  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) fds.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const std::string after = ExpositionText(ProcessCollector());
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(Sample(after, "process_open_fds"), Sample(before, "process_open_fds") + 10);
}

TEST(StorageCollectorTest, SumsEachStoreByKind) {
  conduit::testing::TempDir dir;
  auto write = [&](const std::string& rel, size_t bytes) {
    std::filesystem::create_directories(
        std::filesystem::path(dir.path() + "/" + rel).parent_path());
    std::ofstream(dir.path() + "/" + rel) << std::string(bytes, 'x');
  };
  write("broker/000012.sst", 1000);
  write("broker/000013.sst", 500);
  write("broker/000014.log", 300);
  write("broker/MANIFEST-000005", 40);
  write("queue/000007.log", 70);
  write("stray-file", 9);  // not a store

  const std::string text = ExpositionText(StorageCollector(dir.path()));
  EXPECT_EQ(Sample(text, R"(conduit_storage_bytes\{kind="sst",store="broker"\})"), 1500);
  EXPECT_EQ(Sample(text, R"(conduit_storage_bytes\{kind="wal",store="broker"\})"), 300);
  EXPECT_EQ(Sample(text, R"(conduit_storage_bytes\{kind="other",store="broker"\})"), 40);
  EXPECT_EQ(Sample(text, R"(conduit_storage_bytes\{kind="wal",store="queue"\})"), 70);
  EXPECT_EQ(Sample(text, R"(conduit_storage_bytes\{kind="sst",store="queue"\})"), 0);
  EXPECT_THAT(text, Not(HasSubstr("stray")));

  // A data directory that does not exist yet has no stores.
  EXPECT_TRUE(StorageCollector(dir.path() + "/missing").Collect().empty());
}

TEST(MetricsHubTest, ServesBuildInfoProcessAndAddedCollectables) {
  conduit::testing::TempDir dir;
  std::filesystem::create_directories(dir.path() + "/broker");
  std::ofstream(dir.path() + "/broker/000001.log") << "abc";
  MetricsHub hub;
  hub.AddCollectable(std::make_shared<StorageCollector>(dir.path()));
  ASSERT_TRUE(hub.Serve("127.0.0.1:0").ok());
  const std::string page = conduit::testing::HttpGetMetrics(hub.port());
  EXPECT_THAT(page, HasSubstr("conduit_build_info{"));
  EXPECT_THAT(page, HasSubstr("version=\""));
  EXPECT_THAT(page, HasSubstr("process_resident_memory_bytes"));
  EXPECT_EQ(Sample(page, R"(conduit_storage_bytes\{kind="wal",store="broker"\})"), 3);
}

}  // namespace
}  // namespace conduit::metrics
