#include "tests/hostile/request_mutations.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/grpc/request_checks.h"

namespace conduit::hostile {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using grpc_util::kMaxDurationSeconds;
using grpc_util::kMaxTimestampSeconds;
using grpc_util::kMinTimestampSeconds;

namespace {

std::string NameFor(const std::string& field, const std::string& service) {
  if (field == "name") return service == "conduit.queue.v1.WorkQueue" ? "seedq" : "seed";
  if (field == "topic" || field == "topics" || field == "subscribed_topics") return "seed";
  if (field == "queue") return "seedq";
  if (field == "group_id") return "seedg";
  if (field == "worker_id" || field == "actor" || field == "producer_name" || field == "reason" ||
      field == "client_id") {
    return "walker";
  }
  if (field == "lease_token") return "stale-token";
  return "";
}
bool IsTime(const Descriptor* d) {
  return d->full_name() == "google.protobuf.Duration" ||
         d->full_name() == "google.protobuf.Timestamp";
}

// The boundary values for field `f` of the message that `get` reaches.
void AddMutations(const std::string& path, const FieldDescriptor* f,
                         std::function<Message*(Message*)> get, size_t list_length,
                         std::vector<Mutation>* out) {
  auto add = [&](std::string what, std::function<void(Message*, const Reflection*)> set) {
    out->push_back({absl::StrCat(path, " = ", what), [get, set](Message* root) {
                      Message* m = get(root);
                      set(m, m->GetReflection());
                    }});
  };
  if (f->is_map() || (f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)) {
    add(absl::StrCat(list_length, " elements"), [f, list_length](Message* m,
                                                                 const Reflection* r) {
      const Message* first = r->FieldSize(*m, f) > 0 ? &r->GetRepeatedMessage(*m, f, 0) : nullptr;
      for (size_t i = 0; i < list_length; ++i) {
        Message* e = r->AddMessage(m, f);
        if (first != nullptr && !f->is_map()) {
          e->CopyFrom(r->GetRepeatedMessage(*m, f, 0));
        }
        if (f->is_map()) {  // distinct keys, or the map holds one entry
          const FieldDescriptor* key = e->GetDescriptor()->FindFieldByNumber(1);
          if (key->type() == FieldDescriptor::TYPE_STRING) {
            e->GetReflection()->SetString(e, key, absl::StrCat("k", i));
          }
        }
      }
    });
    if (!f->is_map()) {
      // Each field of the first element.
      const Descriptor* type = f->message_type();
      for (int i = 0; i < type->field_count(); ++i) {
        AddMutations(
            absl::StrCat(path, "[0].", type->field(i)->name()), type->field(i),
            [get, f](Message* root) {
              Message* m = get(root);
              const Reflection* r = m->GetReflection();
              if (r->FieldSize(*m, f) == 0) r->AddMessage(m, f);
              return r->MutableRepeatedMessage(m, f, 0);
            },
            list_length, out);
      }
    }
    return;
  }
  if (f->is_repeated()) {
    add(absl::StrCat(list_length, " elements"),
        [f, list_length](Message* m, const Reflection* r) {
          for (size_t i = 0; i < list_length; ++i) {
            switch (f->cpp_type()) {
              case FieldDescriptor::CPPTYPE_STRING:
                r->AddString(m, f, absl::StrCat("x", i));
                break;
              case FieldDescriptor::CPPTYPE_INT32:
                r->AddInt32(m, f, static_cast<int32_t>(i));
                break;
              case FieldDescriptor::CPPTYPE_INT64:
                r->AddInt64(m, f, static_cast<int64_t>(i));
                break;
              case FieldDescriptor::CPPTYPE_UINT64:
                r->AddUInt64(m, f, i);
                break;
              case FieldDescriptor::CPPTYPE_UINT32:
                r->AddUInt32(m, f, static_cast<uint32_t>(i));
                break;
              case FieldDescriptor::CPPTYPE_ENUM:
                r->AddEnumValue(m, f, static_cast<int>(i % 4));
                break;
              default:
                break;
            }
          }
        });
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
      add("[INT32_MIN, -1]", [f](Message* m, const Reflection* r) {
        r->AddInt32(m, f, std::numeric_limits<int32_t>::min());
        r->AddInt32(m, f, -1);
      });
    }
    return;
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      const bool bytes = f->type() == FieldDescriptor::TYPE_BYTES;
      add("\"\"", [f](Message* m, const Reflection* r) { r->SetString(m, f, ""); });
      add("1 MiB", [f](Message* m, const Reflection* r) {
        r->SetString(m, f, std::string(1 << 20, 'n'));
      });
      add("300 bytes",
          [f](Message* m, const Reflection* r) { r->SetString(m, f, std::string(300, 'n')); });
      add("NUL inside",
          [f](Message* m, const Reflection* r) { r->SetString(m, f, std::string("se\0ed", 5)); });
      if (!bytes) {
        add("invalid UTF-8",
            [f](Message* m, const Reflection* r) { r->SetString(m, f, "se\xff\xfe"); });
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_INT32:
      for (int32_t v :
           {std::numeric_limits<int32_t>::min(), -1, 0, std::numeric_limits<int32_t>::max()}) {
        add(std::to_string(v), [f, v](Message* m, const Reflection* r) { r->SetInt32(m, f, v); });
      }
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{-1},
                        std::numeric_limits<int64_t>::max()}) {
        add(std::to_string(v), [f, v](Message* m, const Reflection* r) { r->SetInt64(m, f, v); });
      }
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      add("UINT32_MAX", [f](Message* m, const Reflection* r) {
        r->SetUInt32(m, f, std::numeric_limits<uint32_t>::max());
      });
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      for (uint64_t v : {uint64_t{0}, std::numeric_limits<uint64_t>::max()}) {
        add(std::to_string(v),
            [f, v](Message* m, const Reflection* r) { r->SetUInt64(m, f, v); });
      }
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      for (double v : {std::nan(""), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity(), 1e-300, -1.0, 1e300}) {
        add(std::to_string(v),
            [f, v](Message* m, const Reflection* r) { r->SetDouble(m, f, v); });
      }
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      add("NaN", [f](Message* m, const Reflection* r) { r->SetFloat(m, f, std::nanf("")); });
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      add("true", [f](Message* m, const Reflection* r) { r->SetBool(m, f, true); });
      add("false", [f](Message* m, const Reflection* r) { r->SetBool(m, f, false); });
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      for (int v : {99, -1}) {
        add(absl::StrCat("enum ", v),
            [f, v](Message* m, const Reflection* r) { r->SetEnumValue(m, f, v); });
      }
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const Descriptor* type = f->message_type();
      auto set_time = [f](int64_t seconds, int32_t nanos) {
        return [f, seconds, nanos](Message* m, const Reflection* r) {
          Message* t = r->MutableMessage(m, f);
          const Descriptor* td = t->GetDescriptor();
          t->GetReflection()->SetInt64(t, td->FindFieldByNumber(1), seconds);
          t->GetReflection()->SetInt32(t, td->FindFieldByNumber(2), nanos);
        };
      };
      if (type->full_name() == "google.protobuf.Duration") {
        for (auto [s, n] :
             std::vector<std::pair<int64_t, int32_t>>{{kMaxDurationSeconds + 1, 0},
                                                      {std::numeric_limits<int64_t>::max(), 0},
                                                      {-kMaxDurationSeconds - 1, 0},
                                                      {kMaxDurationSeconds, 0},
                                                      {0, 1'000'000'000},
                                                      {1, -1},
                                                      {-1, 0}}) {
          add(absl::StrCat("Duration{", s, ", ", n, "}"), set_time(s, n));
        }
      } else if (type->full_name() == "google.protobuf.Timestamp") {
        for (auto [s, n] :
             std::vector<std::pair<int64_t, int32_t>>{{kMaxTimestampSeconds + 1, 0},
                                                      {std::numeric_limits<int64_t>::min(), 0},
                                                      {kMaxTimestampSeconds, 999'999'999},
                                                      {kMinTimestampSeconds, 0},
                                                      {0, -1},
                                                      {0, 1'000'000'000}}) {
          add(absl::StrCat("Timestamp{", s, ", ", n, "}"), set_time(s, n));
        }
      } else if (path.find('.') == std::string::npos ||
                 std::count(path.begin(), path.end(), '.') < 2) {
        for (int i = 0; i < type->field_count(); ++i) {
          AddMutations(
              absl::StrCat(path, ".", type->field(i)->name()), type->field(i),
              [get, f](Message* root) {
                Message* m = get(root);
                return m->GetReflection()->MutableMessage(m, f);
              },
              list_length, out);
        }
      }
      break;
    }
  }
}

}  // namespace

void FillBase(Message* m, const std::string& service, uint64_t job_id, int depth) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string& name = f->name();
    if (f->is_map()) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated() && depth < 2 && !IsTime(f->message_type())) {
        FillBase(r->AddMessage(m, f), service, job_id, depth + 1);
      }
      continue;
    }
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      std::string value = NameFor(name, service);
      if (value.empty()) continue;
      if (f->is_repeated()) {
        r->AddString(m, f, value);
      } else {
        r->SetString(m, f, value);
      }
    } else if (f->type() == FieldDescriptor::TYPE_BYTES && !f->is_repeated()) {
      r->SetString(m, f, "v");
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64 && name == "job_id") {
      r->SetUInt64(m, f, job_id);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64 && name == "job_ids") {
      r->AddUInt64(m, f, job_id);
    }
  }
}

std::vector<Mutation> MutationsOf(const Descriptor* request, size_t list_length) {
  std::vector<Mutation> out;
  for (int i = 0; i < request->field_count(); ++i) {
    AddMutations(
        request->field(i)->name(), request->field(i), [](Message* m) { return m; }, list_length,
        &out);
  }
  return out;
}

}  // namespace conduit::hostile
