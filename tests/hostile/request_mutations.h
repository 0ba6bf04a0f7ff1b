#pragma once

// What the hostile walk sends: plausible base requests, and per field of a request (at every
// depth) the boundary values a careless or malicious client would put there.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace conduit::hostile {

// One mutation: what it does (for failure messages) and how.
struct Mutation {
  std::string what;
  std::function<void(google::protobuf::Message*)> apply;
};

// Fills `m` so that it gets past the first checks: names the seed ("seed" topic, "seedq" queue,
// "seedg" group) as `service` (a fully qualified service name) calls them, puts one element in
// every list of messages, `job_id` where a job id is wanted, plausible strings where a name is.
void FillBase(google::protobuf::Message* m, const std::string& service, uint64_t job_id,
              int depth = 0);

// For each field of `request`, at every depth: empty, 1 MiB, NUL and invalid UTF-8 strings,
// integer extremes, undefined enums, NaN and infinities, Durations and Timestamps outside the
// protobuf ranges (and at their edges), lists of `list_length` elements.
std::vector<Mutation> MutationsOf(const google::protobuf::Descriptor* request,
                                  size_t list_length);

}  // namespace conduit::hostile
