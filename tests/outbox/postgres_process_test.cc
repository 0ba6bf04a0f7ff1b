// PostgresProcess: the test's own PostgreSQL ends with a test that is killed (SIGKILL, as ctest
// kills a test at its timeout), instead of running on as an orphan with its shared memory; it
// did with `pg_ctl start`, which detaches the server from the test.

#include "tests/support/postgres_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "common/testing/spawn.h"
#include "common/testing/temp_dir.h"

namespace conduit::testing {
namespace {

TEST(PostgresProcessTest, TheServerEndsWithATestThatIsKilled) {
  if (!PostgresProcess::Installed()) {
    GTEST_SKIP() << "PostgreSQL 15 is not installed (scripts/install-deps.sh)";
  }
  TempDir dir;
  const std::string pid_file = dir.path() + "/postmaster.pid";
  // The "test": this binary's only test and not yet threaded, so it may fork and go on.
  const pid_t test = ::fork();
  if (test == 0) {
    PostgresProcess pg(dir.path());
    std::ofstream(pid_file) << (pg.running() ? pg.pid() : -1);
    ::kill(::getpid(), SIGKILL);  // no destructor runs
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(test, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  pid_t postmaster = -1;
  std::ifstream(pid_file) >> postmaster;
  ASSERT_GT(postmaster, 0) << "postgres did not start; see " << dir.path() << "/pg.log";
  EXPECT_TRUE(ProcessEndedWithin(postmaster, absl::Seconds(10)))
      << "the postmaster (pid " << postmaster << ") outlived the test";
  ::kill(postmaster, SIGKILL);
}

}  // namespace
}  // namespace conduit::testing
