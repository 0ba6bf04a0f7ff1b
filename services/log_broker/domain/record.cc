#include "services/log_broker/domain/record.h"

namespace conduit::log_broker {

size_t RecordData::PayloadBytes() const {
  size_t n = (key ? key->size() : 0) + (value ? value->size() : 0);
  for (const auto& h : headers) n += h.key.size() + h.value.size();
  return n;
}

}  // namespace conduit::log_broker
