// SpawnTiedChild: what the test helpers (ServerProcess, ChildProcess, EtcdProcess) start dies
// with the test that started it, also when that test is killed.

#include "common/testing/spawn.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "common/testing/temp_dir.h"

namespace conduit::testing {
namespace {

// The sleep a killed "test process" started (PidLeftByAKilledProcess). `tied`: started with
// SpawnTiedChild, else with a plain fork+exec (the negative control).
pid_t SleepOfAKilledTest(const TempDir& dir, bool tied) {
  return PidLeftByAKilledProcess([&]() -> pid_t {
    if (tied) return SpawnTiedChild({"/bin/sleep", "60"}, dir.path() + "/sleep.log");
    const pid_t sleeper = ::fork();
    if (sleeper == 0) {
      ::execl("/bin/sleep", "/bin/sleep", "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return sleeper;
  });
}

TEST(SpawnTiedChildTest, TheChildDiesWithATestThatIsKilled) {
  TempDir dir;
  const pid_t sleeper = SleepOfAKilledTest(dir, /*tied=*/true);
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(ProcessEndedWithin(sleeper, absl::Seconds(10)))
      << "sleep " << sleeper << " outlived it";
  ::kill(sleeper, SIGKILL);
}

// Negative control: the same without the tie leaves the sleep running.
TEST(SpawnTiedChildTest, AnUntiedChildOutlivesATestThatIsKilled) {
  TempDir dir;
  const pid_t sleeper = SleepOfAKilledTest(dir, /*tied=*/false);
  ASSERT_GT(sleeper, 0);
  EXPECT_FALSE(ProcessEndedWithin(sleeper, absl::Milliseconds(500)));
  ::kill(sleeper, SIGKILL);
}

TEST(SpawnTiedChildTest, SaysWhyABinaryCannotStart) {
  TempDir dir;
  int error = 0;
  EXPECT_EQ(SpawnTiedChild({dir.path() + "/no-such-binary"}, dir.path() + "/log", &error), -1);
  EXPECT_EQ(error, ENOENT);
}

TEST(SpawnTiedChildTest, AppendsOutputToTheLog) {
  TempDir dir;
  const std::string log = dir.path() + "/log";
  for (const char* word : {"one", "two"}) {
    const pid_t pid = SpawnTiedChild({"/bin/echo", word}, log);
    ASSERT_GT(pid, 0);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "one\ntwo\n");
}

}  // namespace
}  // namespace conduit::testing
