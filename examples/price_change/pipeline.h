#pragma once

// The services of the price-change example, each as a function of one record or
// job, so the story (price_change.cc) can run them on consumer threads and
// crash them where it wants:
//   product-events ─▶ search index (version guard) · analytics (event-time
//   windows)
//                  ─▶ notifications ─▶ send-merchant-email queue ─▶ email
//                  worker ─▶ provider

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/group_consumer.h"
#include "client/worker.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tools/outbox_relay/pg_connection.h"

namespace conduit::examples {

inline constexpr char kTopic[] = "product-events";
inline constexpr char kEmailQueue[] = "send-merchant-email";
inline constexpr char kEmailTemplate[] = "price-change-email";
// Event types (the outbox row's event_type, carried as the record header
// `event-type`).
inline constexpr char kPriceChanged[] = "PriceChanged";
inline constexpr char kPriceSnapshot[] = "PriceSnapshot";  // a catalog import's copy

// A product's price event: the record's value is this as JSON (see the outbox
// insert in price_change.cc), its key the product id, its event id the outbox
// row's.
struct PriceEvent {
  std::string event_id;
  std::string type;
  std::string product_id;
  std::string merchant_id;
  int64_t old_price = 0;
  int64_t new_price = 0;
  std::optional<std::string> currency;  // absent in the poison event
  int64_t version = 0;
};

// INVALID_ARGUMENT when the value is not such JSON.
absl::StatusOr<PriceEvent> ParseEvent(const std::string& event_id, const std::string& type,
                                      const std::string& json);
absl::StatusOr<PriceEvent> ParseEvent(const client::ConsumedRecord& record);
std::string HeaderOf(const client::ConsumedRecord& record, const std::string& name);

// Search: writes the event's price into `table` unless the row there has the
// same or a newer version ("replace only when the incoming version is newer"),
// so repeats, replays and stale copies change nothing. Returns whether the row
// changed.
absl::StatusOr<bool> ApplyToSearchIndex(outbox::PgConnection& db, const std::string& table,
                                        const PriceEvent& event);

// Notifications: one send-merchant-email job per price change, idempotent by
// event + template + merchant. A change without a currency cannot be written to
// a merchant: a permanent error, so the consumer dead-letters it (with its
// evidence) and moves on.
absl::Status EnqueueMerchantEmail(conduit::queue::v1::WorkQueue::Stub& queue,
                                  const client::ConsumedRecord& record);

// The provider's idempotency key for a job's email: event + template +
// merchant.
std::string EmailKey(const PriceEvent& event);
// The email a job asks for (its payload is the price event).
std::string RenderEmail(const PriceEvent& event);

// Email worker: renders the job's email and sends it through the provider with
// EmailKey, acked once the provider accepted it. A payload that cannot be
// rendered goes to the dead-letter lane.
client::Outcome SendMerchantEmail(const std::string& provider, const client::Job& job);

}  // namespace conduit::examples
