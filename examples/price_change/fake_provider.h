#pragma once

// A stand-in for an email provider's HTTP API, on 127.0.0.1: POST /send with an
// `Idempotency-Key` header. The first request with a key "sends" the email; a
// repeat is answered with the same message id and sends nothing, as real
// providers (Stripe, Postmark, SES with a token) do. It records every request,
// so the example can show that a worker which crashed after the provider
// accepted caused a repeat request but not a second email.

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace conduit::examples {

class FakeEmailProvider {
 public:
  FakeEmailProvider() = default;
  ~FakeEmailProvider();  // Stop()
  FakeEmailProvider(const FakeEmailProvider&) = delete;
  FakeEmailProvider& operator=(const FakeEmailProvider&) = delete;

  // Listens on 127.0.0.1 on a free port and serves one request at a time on its
  // own thread.
  absl::Status Start();
  void Stop();
  std::string address() const;  // host:port

  struct Delivery {
    std::string body;  // the email as first sent
    int requests = 0;  // requests that carried this key (1 + repeats)
  };
  // Emails sent, by idempotency key.
  std::map<std::string, Delivery> deliveries();

 private:
  void Serve();
  void Answer(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  absl::Mutex mu_;
  std::map<std::string, Delivery> deliveries_ ABSL_GUARDED_BY(mu_);
};

// POSTs an email to the provider at `address` (host:port) with
// `idempotency_key`. OK when the provider accepted it (sent now or before);
// UNAVAILABLE when it could not be reached.
absl::Status SendEmail(const std::string& address, const std::string& idempotency_key,
                       const std::string& body);

}  // namespace conduit::examples
