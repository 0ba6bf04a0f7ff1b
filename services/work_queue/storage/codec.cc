#include "services/work_queue/storage/codec.h"

#include <cstring>

#include "common/coding/coding.h"
#include "common/coding/time_coding.h"

namespace conduit::work_queue::codec {
namespace {

using coding::GetTime;
using coding::PutTime;

void PutDuration(std::string* out, absl::Duration d) {
  coding::PutVarint64(out, static_cast<uint64_t>(absl::ToInt64Microseconds(d)));
}
bool GetDuration(std::string_view* in, absl::Duration* d) {
  uint64_t raw = 0;
  if (!coding::GetVarint64(in, &raw)) return false;
  *d = absl::Microseconds(static_cast<int64_t>(raw));
  return true;
}
bool GetString(std::string_view* in, std::string* s) {
  std::string_view v;
  if (!coding::GetLengthPrefixed(in, &v)) return false;
  *s = std::string(v);
  return true;
}
template <typename Int>
bool GetInt(std::string_view* in, Int* v) {
  uint64_t raw = 0;
  if (!coding::GetVarint64(in, &raw)) return false;
  *v = static_cast<Int>(raw);
  return true;
}
uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

absl::Status Corrupt(const char* what) {
  return absl::DataLossError(std::string("corrupt ") + what);
}

}  // namespace

std::string EncodeJob(const Job& job) {
  std::string out;
  out.push_back(2);
  out.push_back(static_cast<char>(job.state));
  coding::PutLengthPrefixed(&out, job.payload);
  coding::PutVarint64(&out, job.headers.size());
  for (const Header& h : job.headers) {
    coding::PutLengthPrefixed(&out, h.key);
    coding::PutLengthPrefixed(&out, h.value);
  }
  coding::PutLengthPrefixed(&out, job.tenant);
  coding::PutVarint64(&out, ZigZag(job.priority));
  coding::PutLengthPrefixed(&out, job.idempotency_key);
  PutTime(&out, job.enqueued_at);
  PutTime(&out, job.ready_at);
  coding::PutLengthPrefixed(&out, job.lease_token.value());
  PutTime(&out, job.lease_deadline);
  coding::PutVarint64(&out, static_cast<uint64_t>(job.failures));
  coding::PutVarint64(&out, static_cast<uint64_t>(job.expiries));
  coding::PutVarint64(&out, static_cast<uint64_t>(job.redrives));
  PutTime(&out, job.died_at);
  coding::PutLengthPrefixed(&out, job.death_reason);
  coding::PutVarint64(&out, job.attempts.size());
  for (const Attempt& a : job.attempts) {
    coding::PutVarint64(&out, a.number);
    coding::PutLengthPrefixed(&out, a.worker);
    PutTime(&out, a.leased_at);
    PutTime(&out, a.ended_at);
    out.push_back(static_cast<char>(a.outcome));
    coding::PutLengthPrefixed(&out, a.reason);
    out.push_back(static_cast<char>(a.failure_class));
  }
  // v2: source
  out.push_back(job.source ? 1 : 0);
  if (job.source) {
    coding::PutLengthPrefixed(&out, job.source->topic);
    coding::PutVarint64(&out, static_cast<uint64_t>(job.source->partition));
    coding::PutVarint64(&out, static_cast<uint64_t>(job.source->offset));
  }
  return out;
}

absl::StatusOr<Job> DecodeJob(uint64_t id, std::string_view in) {
  Job job;
  job.id = id;
  uint8_t version = 0, state = 0;
  uint64_t headers = 0, priority = 0, attempts = 0;
  std::string token;
  if (!coding::GetByte(&in, &version) || (version != 1 && version != 2) ||
      !coding::GetByte(&in, &state) || state > 2 || !GetString(&in, &job.payload) ||
      !coding::GetVarint64(&in, &headers) || headers > in.size()) {
    return Corrupt("job");
  }
  job.state = static_cast<JobState>(state);
  for (uint64_t i = 0; i < headers; ++i) {
    Header h;
    if (!GetString(&in, &h.key) || !GetString(&in, &h.value)) return Corrupt("job header");
    job.headers.push_back(std::move(h));
  }
  if (!GetString(&in, &job.tenant) || !coding::GetVarint64(&in, &priority) ||
      !GetString(&in, &job.idempotency_key) || !GetTime(&in, &job.enqueued_at) ||
      !GetTime(&in, &job.ready_at) || !GetString(&in, &token) ||
      !GetTime(&in, &job.lease_deadline) || !GetInt(&in, &job.failures) ||
      !GetInt(&in, &job.expiries) || !GetInt(&in, &job.redrives) || !GetTime(&in, &job.died_at) ||
      !GetString(&in, &job.death_reason) || !coding::GetVarint64(&in, &attempts) ||
      attempts > in.size()) {
    return Corrupt("job");
  }
  job.lease_token = LeaseToken(std::move(token));
  job.priority = static_cast<int32_t>(UnZigZag(priority));
  for (uint64_t i = 0; i < attempts; ++i) {
    Attempt a;
    uint8_t outcome = 0, klass = 0;
    if (!GetInt(&in, &a.number) || !GetString(&in, &a.worker) || !GetTime(&in, &a.leased_at) ||
        !GetTime(&in, &a.ended_at) || !coding::GetByte(&in, &outcome) || outcome > 3 ||
        !GetString(&in, &a.reason) || !coding::GetByte(&in, &klass) || klass > 1) {
      return Corrupt("job attempt");
    }
    a.outcome = static_cast<Outcome>(outcome);
    a.failure_class = static_cast<FailureClass>(klass);
    job.attempts.push_back(std::move(a));
  }
  if (version >= 2) {
    uint8_t has_source = 0;
    if (!coding::GetByte(&in, &has_source) || has_source > 1) return Corrupt("job source");
    if (has_source) {
      JobSource source;
      if (!GetString(&in, &source.topic) || !GetInt(&in, &source.partition) ||
          !GetInt(&in, &source.offset)) {
        return Corrupt("job source");
      }
      job.source = std::move(source);
    }
  }
  return job;
}

std::string EncodeIndexEntry(const JobIndexEntry& e) {
  std::string out;
  out.push_back(1);
  out.push_back(static_cast<char>(e.state));
  coding::PutLengthPrefixed(&out, e.tenant);
  coding::PutVarint64(&out, ZigZag(e.priority));
  PutTime(&out, e.ready_at);
  PutTime(&out, e.died_at);
  return out;
}

absl::StatusOr<JobIndexEntry> DecodeIndexEntry(uint64_t id, std::string_view in) {
  JobIndexEntry e;
  e.job_id = id;
  uint64_t priority = 0;
  if (in.size() < 2 || in[0] != 1) return Corrupt("job index entry");
  const auto state = static_cast<uint8_t>(in[1]);
  in.remove_prefix(2);
  if (state > static_cast<uint8_t>(JobState::kDead) || !GetString(&in, &e.tenant) ||
      !coding::GetVarint64(&in, &priority) || !GetTime(&in, &e.ready_at) ||
      !GetTime(&in, &e.died_at) || !in.empty()) {
    return Corrupt("job index entry");
  }
  e.state = static_cast<JobState>(state);
  e.priority = static_cast<int32_t>(UnZigZag(priority));
  return e;
}

std::string EncodeLease(const LeaseRecord& l) {
  std::string out;
  out.push_back(1);
  coding::PutLengthPrefixed(&out, l.token.value());
  PutTime(&out, l.deadline);
  coding::PutVarint64(&out, l.attempt.number);
  coding::PutLengthPrefixed(&out, l.attempt.worker);
  PutTime(&out, l.attempt.leased_at);
  return out;
}

absl::StatusOr<LeaseRecord> DecodeLease(uint64_t id, std::string_view in) {
  LeaseRecord l;
  l.job_id = id;
  std::string token;
  if (in.empty() || in[0] != 1) return Corrupt("lease");
  in.remove_prefix(1);
  if (!GetString(&in, &token) || !GetTime(&in, &l.deadline) || !GetInt(&in, &l.attempt.number) ||
      !GetString(&in, &l.attempt.worker) || !GetTime(&in, &l.attempt.leased_at) || !in.empty()) {
    return Corrupt("lease");
  }
  l.token = LeaseToken(std::move(token));
  return l;
}

std::string EncodeQueue(const QueueMeta& q) {
  const QueueConfig& c = q.config;
  std::string out;
  out.push_back(3);
  coding::PutBigEndian64(&out, q.id.value());
  coding::PutLengthPrefixed(&out, q.name);
  PutTime(&out, q.created);
  PutDuration(&out, c.visibility_timeout);
  coding::PutVarint64(&out, static_cast<uint64_t>(c.max_attempts));
  coding::PutVarint64(&out, static_cast<uint64_t>(c.max_lease_expiries));
  PutDuration(&out, c.backoff_initial);
  uint64_t bits = 0;
  std::memcpy(&bits, &c.backoff_multiplier, sizeof bits);
  coding::PutBigEndian64(&out, bits);
  PutDuration(&out, c.backoff_max);
  PutDuration(&out, c.idempotency_window);
  coding::PutVarint64(&out, static_cast<uint64_t>(c.max_depth));
  coding::PutVarint64(&out, static_cast<uint64_t>(c.max_redrives));
  // v2:
  PutDuration(&out, c.max_ready_age);
  coding::PutVarint64(&out, c.tenant_weights.size());
  for (const auto& [tenant, weight] : c.tenant_weights) {
    coding::PutLengthPrefixed(&out, tenant);
    coding::PutVarint64(&out, static_cast<uint64_t>(weight));
  }
  coding::PutVarint64(&out, static_cast<uint64_t>(c.max_in_flight_per_tenant));
  // v3:
  out.push_back(c.durability == QueueDurability::kInterval ? 1 : 0);
  PutDuration(&out, c.flush_interval);
  return out;
}

absl::StatusOr<QueueMeta> DecodeQueue(std::string_view in) {
  QueueMeta q;
  QueueConfig& c = q.config;
  uint8_t version = 0;
  uint64_t id = 0, bits = 0;
  if (!coding::GetByte(&in, &version) || version < 1 || version > 3 ||
      !coding::GetFixed64(&in, &id) || !GetString(&in, &q.name) || !GetTime(&in, &q.created) ||
      !GetDuration(&in, &c.visibility_timeout) || !GetInt(&in, &c.max_attempts) ||
      !GetInt(&in, &c.max_lease_expiries) || !GetDuration(&in, &c.backoff_initial) ||
      !coding::GetFixed64(&in, &bits) || !GetDuration(&in, &c.backoff_max) ||
      !GetDuration(&in, &c.idempotency_window) || !GetInt(&in, &c.max_depth) ||
      !GetInt(&in, &c.max_redrives)) {
    return Corrupt("queue");
  }
  q.id = QueueId(id);
  std::memcpy(&c.backoff_multiplier, &bits, sizeof bits);
  if (version == 1) return q;
  uint64_t weights = 0;
  if (!GetDuration(&in, &c.max_ready_age) || !coding::GetVarint64(&in, &weights) ||
      weights > in.size()) {
    return Corrupt("queue");
  }
  for (uint64_t i = 0; i < weights; ++i) {
    std::string tenant;
    int32_t weight = 0;
    if (!GetString(&in, &tenant) || !GetInt(&in, &weight)) return Corrupt("queue tenant weight");
    c.tenant_weights[tenant] = weight;
  }
  if (!GetInt(&in, &c.max_in_flight_per_tenant)) return Corrupt("queue");
  if (version == 2) return q;
  uint8_t durability = 0;
  if (!coding::GetByte(&in, &durability) || durability > 1 ||
      !GetDuration(&in, &c.flush_interval)) {
    return Corrupt("queue durability");
  }
  c.durability = durability == 1 ? QueueDurability::kInterval : QueueDurability::kSync;
  return q;
}

std::string EncodeIdempotency(uint64_t job_id, absl::Time at) {
  std::string out;
  coding::PutBigEndian64(&out, job_id);
  coding::PutBigEndian64(&out, static_cast<uint64_t>(absl::ToUnixMicros(at)));
  return out;
}

absl::StatusOr<std::pair<uint64_t, absl::Time>> DecodeIdempotency(std::string_view in) {
  if (in.size() != 16) return Corrupt("idempotency entry");
  return std::make_pair(
      coding::ReadBigEndian64(in.data()),
      absl::FromUnixMicros(static_cast<int64_t>(coding::ReadBigEndian64(in.data() + 8))));
}

std::string EncodeBridge(const BridgeSpec& spec) {
  std::string out;
  out.push_back(1);
  coding::PutBigEndian64(&out, spec.id);
  for (const std::string* field :
       {&spec.name, &spec.topic, &spec.group, &spec.queue, &spec.key_prefix, &spec.header,
        &spec.header_value, &spec.tenant_header, &spec.priority_header}) {
    coding::PutLengthPrefixed(&out, *field);
  }
  PutTime(&out, spec.created);
  out.push_back(spec.paused ? 1 : 0);
  return out;
}

absl::StatusOr<BridgeSpec> DecodeBridge(std::string_view in) {
  BridgeSpec spec;
  uint8_t version = 0, paused = 0;
  bool ok = coding::GetByte(&in, &version) && version == 1 && coding::GetFixed64(&in, &spec.id);
  for (std::string* field :
       {&spec.name, &spec.topic, &spec.group, &spec.queue, &spec.key_prefix, &spec.header,
        &spec.header_value, &spec.tenant_header, &spec.priority_header}) {
    ok = ok && GetString(&in, field);
  }
  ok = ok && GetTime(&in, &spec.created) && coding::GetByte(&in, &paused) && in.empty();
  if (!ok) return absl::DataLossError("corrupt bridge record");
  spec.paused = paused != 0;
  return spec;
}

std::string EncodeCounter(uint64_t value) {
  std::string out;
  coding::PutBigEndian64(&out, value);
  return out;
}

absl::StatusOr<uint64_t> DecodeCounter(std::string_view in) {
  if (in.size() != 8) return Corrupt("counter");
  return coding::ReadBigEndian64(in.data());
}

}  // namespace conduit::work_queue::codec
