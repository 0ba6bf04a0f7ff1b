#include "common/rocksdb/space_guard.h"

#include <gtest/gtest.h>

#include "common/commit/group_commit.h"

namespace conduit::rocksdb_util {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kReserve = 64 * kMiB;

// A volume whose free space the test sets, counting how often it is read.
struct FakeVolume {
  std::optional<int64_t> free = 1024 * kMiB;
  int reads = 0;
  SpaceGuard::FreeSpaceReader Reader() {
    return [this](const std::string&) {
      ++reads;
      return free;
    };
  }
};

class SpaceGuardTest : public ::testing::Test {
 protected:
  time::FakeClock clock_;
  FakeVolume volume_;
  SpaceGuard guard_{"/data", kReserve, &clock_, volume_.Reader()};
};

TEST_F(SpaceGuardTest, AReadingWithTwiceTheReserveFreeIsTrustedForTheRereadPeriod) {
  EXPECT_TRUE(guard_.Check().ok());
  EXPECT_TRUE(guard_.Check().ok());
  EXPECT_EQ(volume_.reads, 1);
  // Space taken by someone else is seen once the period is over, not before.
  volume_.free = kReserve / 2;
  clock_.Advance(SpaceGuard::kRereadAfter - absl::Milliseconds(1));
  EXPECT_TRUE(guard_.Check().ok());
  EXPECT_EQ(volume_.reads, 1);
  clock_.Advance(absl::Milliseconds(1));
  absl::Status full = guard_.Check();
  EXPECT_TRUE(commit::IsDiskFull(full)) << full;
  EXPECT_NE(full.message().find("32 MiB free, below the reserve of 64 MiB"), std::string::npos)
      << full.message();
  EXPECT_EQ(volume_.reads, 2);
}

TEST_F(SpaceGuardTest, CloseToTheReserveOrBelowItEveryCheckReadsAgain) {
  volume_.free = kReserve + kMiB;  // above the reserve, under twice it
  EXPECT_TRUE(guard_.Check().ok());
  EXPECT_TRUE(guard_.Check().ok());
  EXPECT_EQ(volume_.reads, 2);
  volume_.free = kReserve - 1;
  EXPECT_TRUE(commit::IsDiskFull(guard_.Check()));
  EXPECT_TRUE(commit::IsDiskFull(guard_.Check()));
  EXPECT_EQ(volume_.reads, 4);
  // Space freed: the next write goes through, without waiting for a period.
  volume_.free = 1024 * kMiB;
  EXPECT_TRUE(guard_.Check().ok());
}

TEST_F(SpaceGuardTest, AnUnreadableVolumeIsNotRefusedAndNotTrusted) {
  volume_.free = std::nullopt;
  EXPECT_TRUE(guard_.Check().ok());
  EXPECT_TRUE(guard_.Check().ok());
  EXPECT_EQ(volume_.reads, 2);
}

TEST_F(SpaceGuardTest, NoReserveNeverReads) {
  SpaceGuard off("/data", 0, &clock_, volume_.Reader());
  volume_.free = 0;
  EXPECT_TRUE(off.Check().ok());
  EXPECT_EQ(volume_.reads, 0);
}

TEST(SpaceGuardRealVolume, ReadsTheFreeSpaceOfAPath) {
  const std::optional<int64_t> free = SpaceGuard::ReadFreeSpace("/");
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(*free, 0);
  EXPECT_FALSE(SpaceGuard::ReadFreeSpace("/no/such/path/at/all").has_value());
}

}  // namespace
}  // namespace conduit::rocksdb_util
