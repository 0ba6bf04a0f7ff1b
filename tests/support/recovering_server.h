#pragma once

#include <sys/types.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/child_process.h"

namespace conduit::testing {

// A Conduit server child process that may spend minutes recovering a deep store before it
// serves (ServerProcess gives a server 30 s). Started as ServerProcess starts one: 127.0.0.1:0,
// a --port-file, no metrics listener, log level warn, output appended to <work>/server.log. The
// constructor returns once the process is spawned, so a caller can time the start; WaitForPort
// waits for it to serve. The destructor SIGKILLs it if still running. Not thread-safe.
class RecoveringServer {
 public:
  RecoveringServer(const std::string& binary, const std::string& data_dir, const std::string& work)
      : port_file_(work + "/port"),
        child_(
            [&] {
              std::remove(port_file_.c_str());  // the last run's port
              return std::vector<std::string>{
                  binary,        "--data-dir",       data_dir, "--listen",
                  "127.0.0.1:0", "--metrics-listen", "",       "--port-file",
                  port_file_,    "--log-level",      "warn"};
            }(),
            work + "/server.log") {}

  // Waits until the server wrote its port (it does once serving); then address() is set.
  // UNAVAILABLE when the process could not start or exited, DEADLINE_EXCEEDED after `timeout`.
  absl::Status WaitForPort(absl::Duration timeout) {
    for (const absl::Time give_up = absl::Now() + timeout; absl::Now() < give_up;) {
      std::ifstream in(port_file_);
      int port = 0;
      if (in >> port && port > 0) {
        address_ = absl::StrCat("127.0.0.1:", port);
        return absl::OkStatus();
      }
      if (child_.Exited()) return absl::UnavailableError("the server exited before serving");
      absl::SleepFor(absl::Milliseconds(10));  // a child process recovering, then binding
    }
    return absl::DeadlineExceededError(
        absl::StrCat("the server wrote no port within ", absl::FormatDuration(timeout)));
  }

  pid_t pid() const { return child_.pid(); }
  // Empty until WaitForPort succeeded.
  const std::string& address() const { return address_; }

  // Sends `signal` and reaps the process; its wait status (0 when it was not running).
  int Kill(int signal) { return child_.Kill(signal); }

 private:
  std::string port_file_;  // first: the child's arguments name it
  ChildProcess child_;
  std::string address_;
};

}  // namespace conduit::testing
