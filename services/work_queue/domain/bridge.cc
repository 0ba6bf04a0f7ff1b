#include "services/work_queue/domain/bridge.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/work_queue/domain/queue_rules.h"

namespace conduit::work_queue {
namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

const std::string* FindHeader(const BridgedRecord& record, const std::string& name) {
  for (const auto& [k, v] : record.headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace

absl::Status ValidateBridgeSpec(BridgeSpec* spec) {
  if (spec->name.empty() || spec->name.size() > kMaxBridgeNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("bridge name must be 1..", kMaxBridgeNameBytes,
                                                   " characters, got ", spec->name.size()));
  }
  for (char c : spec->name) {
    if (!NameChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bridge name '", spec->name, "' may only contain [a-zA-Z0-9._-]"));
    }
  }
  if (spec->topic.empty() || spec->topic.size() > 249) {
    return absl::InvalidArgumentError("bridge topic must be 1..249 characters");
  }
  if (auto s = ValidateQueueName(spec->queue); !s.ok()) return s;
  if (spec->group.empty()) spec->group = absl::StrCat("bridge.", spec->name);
  if (spec->group.size() > 249) {
    return absl::InvalidArgumentError("bridge group must be at most 249 characters");
  }
  if (spec->header.empty() && !spec->header_value.empty()) {
    return absl::InvalidArgumentError("bridge filter: header_value needs a header name");
  }
  for (const std::string* field : {&spec->key_prefix, &spec->header, &spec->header_value,
                                   &spec->tenant_header, &spec->priority_header}) {
    if (field->size() > 1024) {
      return absl::InvalidArgumentError("bridge filter and header names are limited to 1024 bytes");
    }
  }
  return absl::OkStatus();
}

bool BridgeAccepts(const BridgeSpec& spec, const BridgedRecord& record) {
  if (!spec.key_prefix.empty() &&
      (!record.key || !absl::StartsWith(*record.key, spec.key_prefix))) {
    return false;
  }
  if (!spec.header.empty()) {
    const std::string* v = FindHeader(record, spec.header);
    if (v == nullptr || *v != spec.header_value) return false;
  }
  return true;
}

NewJob BridgeJob(const BridgeSpec& spec, BridgedRecord record) {
  NewJob job;
  job.payload = record.value.value_or("");
  if (!spec.tenant_header.empty()) {
    const std::string* tenant = FindHeader(record, spec.tenant_header);
    if (tenant != nullptr && tenant->size() <= kMaxTenantBytes) job.tenant = *tenant;
  }
  if (!spec.priority_header.empty()) {
    const std::string* priority = FindHeader(record, spec.priority_header);
    int32_t p = 0;
    if (priority != nullptr && absl::SimpleAtoi(*priority, &p)) job.priority = p;
  }
  job.headers.reserve(record.headers.size() + 4);
  for (auto& [k, v] : record.headers) job.headers.push_back(Header{std::move(k), std::move(v)});
  job.headers.push_back(Header{"conduit-source-topic", record.topic});
  job.headers.push_back(Header{"conduit-source-partition", absl::StrCat(record.partition)});
  job.headers.push_back(Header{"conduit-source-offset", absl::StrCat(record.offset)});
  if (!record.event_id.empty()) job.headers.push_back(Header{"conduit-event-id", record.event_id});
  job.idempotency_key = absl::StrCat("bridge/", spec.id, "/", record.partition, "/", record.offset);
  job.source = JobSource{std::move(record.topic), record.partition, record.offset};
  return job;
}

}  // namespace conduit::work_queue
