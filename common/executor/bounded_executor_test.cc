#include "common/executor/bounded_executor.h"

#include <atomic>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace conduit::executor {
namespace {

TEST(BoundedExecutor, RejectsWhenFullAndDrainsOnDestruction) {
  std::atomic<int> ran{0};
  absl::Notification release;
  {
    BoundedExecutor executor("test", 1, 2);
    absl::Notification started;
    ASSERT_TRUE(executor.TrySubmit([&] {
      started.Notify();
      release.WaitForNotification();
      ran++;
    }));
    started.WaitForNotification();
    ASSERT_TRUE(executor.TrySubmit([&] { ran++; }));
    ASSERT_TRUE(executor.TrySubmit([&] { ran++; }));
    EXPECT_FALSE(executor.TrySubmit([&] { ran++; })) << "queue of 2 is full";
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 3);
}

}  // namespace
}  // namespace conduit::executor
