// PostgresProcess: the test's own PostgreSQL ends with a test that is killed (SIGKILL, as ctest
// kills a test at its timeout), instead of running on as an orphan with its shared memory; it
// did with `pg_ctl start`, which detaches the server from the test.

#include "tests/support/postgres_process.h"

#include <signal.h>

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
  // This binary's only test, not yet threaded: it may fork.
  const pid_t postmaster = PidLeftByAKilledProcess([&]() -> pid_t {
    auto* pg = new PostgresProcess(dir.path());  // never stopped: its process is killed
    return pg->running() ? pg->pid() : -1;
  });
  ASSERT_GT(postmaster, 0) << "postgres did not start; see " << dir.path() << "/pg.log";
  EXPECT_TRUE(ProcessEndedWithin(postmaster, absl::Seconds(10)))
      << "the postmaster (pid " << postmaster << ") outlived the test";
  ::kill(postmaster, SIGKILL);
}

}  // namespace
}  // namespace conduit::testing
