#pragma once

#include <cstdint>

#include "common/ids/strong_id.h"

namespace conduit::log_broker {

// A topic's id (from an IdAllocator): never held by two live topics at once; names its column
// family and its keys. Apart from
// producer ids and offsets, which are integers too.
struct TopicIdTag {};
using TopicId = ids::StrongId<TopicIdTag, uint64_t>;

// An idempotent producer's id (InitProducer).
struct ProducerIdTag {};
using ProducerId = ids::StrongId<ProducerIdTag, int64_t>;

}  // namespace conduit::log_broker
