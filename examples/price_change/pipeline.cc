#include "examples/price_change/pipeline.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "client/dead_letters.h"
#include "examples/price_change/fake_provider.h"

namespace conduit::examples {
namespace {

namespace queuepb = ::conduit::queue::v1;

std::string StringField(const google::protobuf::Struct& s, const std::string& name) {
  auto it = s.fields().find(name);
  return it != s.fields().end() && it->second.has_string_value() ? it->second.string_value() : "";
}

}  // namespace

absl::StatusOr<PriceEvent> ParseEvent(const std::string& event_id, const std::string& type,
                                      const std::string& json) {
  google::protobuf::Struct s;
  if (!google::protobuf::util::JsonStringToMessage(json, &s).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("event ", event_id, " is not JSON"));
  }
  PriceEvent e;
  e.event_id = event_id;
  e.type = type;
  e.product_id = StringField(s, "product_id");
  e.merchant_id = StringField(s, "merchant_id");
  const auto& f = s.fields();
  auto number = [&](const std::string& name) -> int64_t {
    auto it = f.find(name);
    return it != f.end() && it->second.has_number_value()
               ? static_cast<int64_t>(it->second.number_value())
               : -1;
  };
  e.old_price = number("old_price");
  e.new_price = number("new_price");
  e.version = number("version");
  if (auto it = f.find("currency"); it != f.end() && it->second.has_string_value()) {
    e.currency = it->second.string_value();
  }
  if (e.product_id.empty() || e.new_price < 0 || e.version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("event ", event_id, " lacks product_id, new_price or version"));
  }
  return e;
}

std::string HeaderOf(const client::ConsumedRecord& record, const std::string& name) {
  for (const auto& [k, v] : record.headers)
    if (k == name) return v;
  return "";
}

absl::StatusOr<PriceEvent> ParseEvent(const client::ConsumedRecord& record) {
  return ParseEvent(record.event_id, HeaderOf(record, "event-type"), record.value.value_or(""));
}

absl::StatusOr<bool> ApplyToSearchIndex(outbox::PgConnection& db, const std::string& table,
                                        const PriceEvent& event) {
  const std::string t = db.QuoteIdentifier(table);
  auto r = db.Exec(absl::StrCat("INSERT INTO ", t,
                                " AS s (product_id, price, currency, version) VALUES ($1, $2, $3, "
                                "$4) ON CONFLICT (product_id) DO UPDATE SET price = "
                                "EXCLUDED.price, currency = EXCLUDED.currency, version = "
                                "EXCLUDED.version WHERE s.version < EXCLUDED.version"),
                   {event.product_id, absl::StrCat(event.new_price), event.currency.value_or(""),
                    absl::StrCat(event.version)});
  if (!r.ok()) return r.status();
  return std::string(PQcmdTuples(r->get())) == "1";
}

std::string EmailKey(const PriceEvent& event) {
  return absl::StrCat(event.event_id, "/", kEmailTemplate, "/", event.merchant_id);
}

std::string RenderEmail(const PriceEvent& event) {
  return absl::StrCat("{\"to\":\"", event.merchant_id, "\",\"template\":\"", kEmailTemplate,
                      "\",\"text\":\"", event.product_id, " now costs ", event.new_price, " ",
                      event.currency.value_or("?"), " (was ", event.old_price, ")\"}");
}

absl::Status EnqueueMerchantEmail(queuepb::WorkQueue::Stub& queue,
                                  const client::ConsumedRecord& record) {
  auto event = ParseEvent(record);
  if (!event.ok()) return client::PermanentError(event.status().message());
  if (event->type != kPriceChanged) return absl::OkStatus();  // snapshots send nothing
  if (!event->currency.has_value() || event->currency->empty()) {
    return client::PermanentError(
        absl::StrCat("price change ", event->event_id, " has no currency"));
  }
  queuepb::EnqueueRequest request;
  request.set_queue(kEmailQueue);
  queuepb::NewJob* job = request.add_jobs();
  job->set_payload(*record.value);
  job->set_idempotency_key(EmailKey(*event));
  auto* h = job->add_headers();
  h->set_key("event-id");
  h->set_value(event->event_id);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  queuepb::EnqueueResponse response;
  grpc::Status s = queue.Enqueue(&ctx, request, &response);
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("enqueue: ", s.error_message()));
  return absl::OkStatus();
}

client::Outcome SendMerchantEmail(const std::string& provider, const client::Job& job) {
  std::string event_id;
  for (const auto& [k, v] : job.headers) {
    // Jobs from the notification consumer carry event-id; a redriven dead
    // letter carries the evidence header conduit-event-id.
    if (k == "event-id" || k == "conduit-event-id") event_id = v;
  }
  auto event = ParseEvent(event_id, kPriceChanged, job.payload);
  if (!event.ok() || !event->currency.has_value()) {
    return client::Outcome::DeadLetter(event.ok() ? "no currency" : event.status().ToString());
  }
  absl::Status sent = SendEmail(provider, EmailKey(*event), RenderEmail(*event));
  if (sent.ok()) return client::Outcome::Ack();
  if (absl::IsUnavailable(sent)) return client::Outcome::Retry(std::string(sent.message()));
  return client::Outcome::DeadLetter(std::string(sent.message()));
}

}  // namespace conduit::examples
