#include "common/grpc/request_checks.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace conduit::grpc_util {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr int32_t kMaxNanos = 999'999'999;

// The fields of one message type that are, or can lead to, a Duration or a Timestamp.
struct Plan {
  enum class Kind { kDuration, kTimestamp, kMessage };
  struct Entry {
    const FieldDescriptor* field;
    Kind kind;
    const Plan* child;  // kMessage only
  };
  std::vector<Entry> entries;
};

class PlanCache {
 public:
  static PlanCache& Get() {
    static PlanCache* cache = new PlanCache();
    return *cache;
  }

  const Plan* For(const Descriptor* d) {
    {
      absl::ReaderMutexLock lock(&mu_);
      if (auto it = plans_.find(d); it != plans_.end()) return it->second.get();
    }
    absl::MutexLock lock(&mu_);
    return BuildLocked(d);
  }

 private:
  static bool IsDuration(const Descriptor* d) {
    return d->full_name() == "google.protobuf.Duration";
  }
  static bool IsTimestamp(const Descriptor* d) {
    return d->full_name() == "google.protobuf.Timestamp";
  }

  // Plans are built whole for a type and its nested types. A recursive type refers to a plan
  // still being filled: it is kept, since it may yet gain entries.
  const Plan* BuildLocked(const Descriptor* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (auto it = plans_.find(d); it != plans_.end()) return it->second.get();
    Plan* plan = (plans_[d] = std::make_unique<Plan>()).get();
    building_.insert(d);
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
      const Descriptor* type = f->message_type();
      if (IsDuration(type)) {
        plan->entries.push_back({f, Plan::Kind::kDuration, nullptr});
      } else if (IsTimestamp(type)) {
        plan->entries.push_back({f, Plan::Kind::kTimestamp, nullptr});
      } else {
        const Plan* child = BuildLocked(type);
        if (building_.contains(type) || !child->entries.empty()) {
          plan->entries.push_back({f, Plan::Kind::kMessage, child});
        }
      }
    }
    building_.erase(d);
    return plan;
  }

  absl::Mutex mu_;
  absl::flat_hash_map<const Descriptor*, std::unique_ptr<Plan>> plans_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<const Descriptor*> building_ ABSL_GUARDED_BY(mu_);
};

void SecondsAndNanos(const Message& m, int64_t* seconds, int32_t* nanos) {
  const Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  *seconds = r->GetInt64(m, d->FindFieldByNumber(1));
  *nanos = r->GetInt32(m, d->FindFieldByNumber(2));
}

absl::Status CheckDuration(const Message& m) {
  int64_t seconds = 0;
  int32_t nanos = 0;
  SecondsAndNanos(m, &seconds, &nanos);
  if (seconds < -kMaxDurationSeconds || seconds > kMaxDurationSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("is a Duration of ", seconds,
                                                   " seconds; the protobuf range is ±",
                                                   kMaxDurationSeconds, " (10,000 years)"));
  }
  if (nanos < -kMaxNanos || nanos > kMaxNanos) {
    return absl::InvalidArgumentError(
        absl::StrCat("is a Duration with nanos ", nanos, "; they must be within ±", kMaxNanos));
  }
  if ((seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("is a Duration of ", seconds, " seconds and ",
                                                   nanos, " nanos; their signs must agree"));
  }
  return absl::OkStatus();
}

absl::Status CheckTimestamp(const Message& m) {
  int64_t seconds = 0;
  int32_t nanos = 0;
  SecondsAndNanos(m, &seconds, &nanos);
  return CheckTimestampValue(seconds, nanos);
}

absl::Status Check(const Message& m, const Plan& plan);

// Checks one present value of `e`. A failure's message continues the field's name: " is a
// Duration ..." for a leaf, ".inner is a Duration ..." for a nested message.
absl::Status CheckValue(const Message& value, const Plan::Entry& e) {
  absl::Status s;
  switch (e.kind) {
    case Plan::Kind::kDuration:
      s = CheckDuration(value);
      break;
    case Plan::Kind::kTimestamp:
      s = CheckTimestamp(value);
      break;
    case Plan::Kind::kMessage:
      s = Check(value, *e.child);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(".", s.message()));
      return s;
  }
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(" ", s.message()));
  return s;
}

absl::Status Check(const Message& m, const Plan& plan) {
  const Reflection* r = m.GetReflection();
  for (const Plan::Entry& e : plan.entries) {
    if (e.field->is_repeated()) {
      const int n = r->FieldSize(m, e.field);
      for (int i = 0; i < n; ++i) {
        const Message& value = r->GetRepeatedMessage(m, e.field, i);
        if (auto s = CheckValue(value, e); !s.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(e.field->name(), "[", i, "]", s.message()));
        }
      }
    } else if (r->HasField(m, e.field)) {
      if (auto s = CheckValue(r->GetMessage(m, e.field), e); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(e.field->name(), s.message()));
      }
    }
  }
  return absl::OkStatus();
}

// The paths of `plan`'s time fields under `prefix`; `on_path`: plans being walked (a recursive
// type's paths end where it recurs).
void AddPaths(const Plan& plan, const std::string& prefix, std::vector<const Plan*>& on_path,
              std::vector<std::string>* paths) {
  on_path.push_back(&plan);
  for (const Plan::Entry& e : plan.entries) {
    const std::string path = prefix + e.field->name();
    if (e.kind != Plan::Kind::kMessage) {
      paths->push_back(path);
    } else if (std::find(on_path.begin(), on_path.end(), e.child) == on_path.end()) {
      AddPaths(*e.child, path + ".", on_path, paths);
    }
  }
  on_path.pop_back();
}

}  // namespace

absl::Status CheckTimestampValue(int64_t seconds, int32_t nanos) {
  if (seconds < kMinTimestampSeconds || seconds > kMaxTimestampSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("is a Timestamp of ", seconds,
                     " seconds since the epoch; the protobuf range is years 0001 to 9999 (",
                     kMinTimestampSeconds, " .. ", kMaxTimestampSeconds, ")"));
  }
  if (nanos < 0 || nanos > kMaxNanos) {
    return absl::InvalidArgumentError(
        absl::StrCat("is a Timestamp with nanos ", nanos, "; they must be within 0..", kMaxNanos));
  }
  return absl::OkStatus();
}

std::vector<std::string> TimeFieldPaths(const Descriptor* type) {
  std::vector<std::string> paths;
  std::vector<const Plan*> on_path;
  AddPaths(*PlanCache::Get().For(type), "", on_path, &paths);
  return paths;
}

absl::Status CheckTimeFields(const Message& request) {
  // A stream's messages are of one type: each thread remembers the last type's plan (plans are
  // complete once For returns, and never freed), so a message costs no lock.
  thread_local const Descriptor* last_type = nullptr;
  thread_local const Plan* last_plan = nullptr;
  const Descriptor* type = request.GetDescriptor();
  if (type != last_type) {
    last_plan = PlanCache::Get().For(type);
    last_type = type;
  }
  const Plan* plan = last_plan;
  if (plan->entries.empty()) return absl::OkStatus();
  return Check(request, *plan);
}

}  // namespace conduit::grpc_util
