#pragma once

#include <cstddef>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace conduit::grpc_util {

// The plumbing of a bidi stream's reactor whose reads, writes and other work (a broker or a
// queue answering) overlap. The stream's state is under one mutex, and every reaction has two
// halves: change the state and decide the next steps under the mutex (NextLocked), then carry
// them out once it is released (Run), because gRPC may run a reaction on the thread that starts
// an operation. This class holds the state every such stream has (a read or a write in flight,
// the client's half-close, a broken stream, finished) and the reactions that are the same for
// all of them: a write done, a cancel, and deleting the reactor when gRPC is done with it.
//
// `Derived` is the stream's reactor (final), which befriends this class and has
//   Steps NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // the next write, read, finish or
//       // other work, by the state; marks what it starts (writing_, reading_, finished_) so
//       // that no other reaction starts it again
//   void Run(Steps steps);  // carries them out, without the mutex
// `Base` is the gRPC reactor (grpc::ServerBidiReactor<Request, Response>, or
// ParsedBidiReactor<Request, Response>). The derived class starts the first read in its
// constructor (reading_ starts true), implements the read reaction with React, and calls Finish
// only from Run, once nothing is outstanding, so no reaction runs on a deleted reactor.
template <typename Derived, typename Base>
class SteppedReactor : public Base {
 protected:
  // Runs `change` under the mutex, decides the next steps, and runs them once it is released.
  // `change` is annotated ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) when it touches guarded state, so
  // its body is checked; the analysis cannot follow a lambda's annotation to this call (nor
  // `mu_` through the cast to Derived), hence the exemption of this function alone.
  template <typename Change>
  void React(Change&& change) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Derived& self = static_cast<Derived&>(*this);
    mu_.Lock();
    change();
    auto steps = self.NextLocked();
    mu_.Unlock();
    self.Run(std::move(steps));
  }
  // A read came back empty (the client half-closed, or the stream broke), or one did not parse.
  void ReadsEnded() ABSL_LOCKS_EXCLUDED(mu_) {
    React([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { EndReadsLocked(); });
  }
  // No read is in flight and none is to start.
  void EndReadsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    reading_ = false;
    reads_done_ = true;
  }

  void OnWriteDone(bool ok) final {
    React([this, ok]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      writing_ = false;
      in_flight_ = 0;
      if (!ok) broken_ = true;
    });
  }
  void OnCancel() final {
    React([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { broken_ = true; });
  }
  void OnDone() final { delete static_cast<Derived*>(this); }

  absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = true;  // the constructor's read
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // what the write in flight carries (answers, jobs)
  bool broken_ ABSL_GUARDED_BY(mu_) = false;   // cancelled, or a write failed
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace conduit::grpc_util
