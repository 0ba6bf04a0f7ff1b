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

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"

namespace conduit::testing {
namespace {

// A "test process" (forked here) starts a long sleep as its child, says its pid, and is killed
// (SIGKILL, as ctest kills a test at its timeout): no destructor runs. `tied`: started with
// SpawnTiedChild, else with a plain fork+exec (the negative control). Returns the sleep's pid.
pid_t SleepOfAKilledTest(const TempDir& dir, bool tied) {
  const std::string pid_file = dir.path() + "/sleep.pid";
  const pid_t test = ::fork();
  if (test == 0) {
    pid_t sleeper = -1;
    if (tied) {
      sleeper = SpawnTiedChild({"/bin/sleep", "60"}, dir.path() + "/sleep.log");
    } else if ((sleeper = ::fork()) == 0) {
      ::execl("/bin/sleep", "/bin/sleep", "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::ofstream(pid_file) << sleeper;
    ::kill(::getpid(), SIGKILL);  // as ctest does at a timeout
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(test, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  pid_t sleeper = -1;
  std::ifstream(pid_file) >> sleeper;
  return sleeper;
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
