#include "services/log_broker/log_broker_node.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace conduit::log_broker {

absl::StatusOr<std::unique_ptr<LogBrokerNode>> LogBrokerNode::Open(const std::string& data_dir,
                                                                   prometheus::Registry& registry,
                                                                   const time::Clock* clock,
                                                                   BrokerOptions options) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data directory '", data_dir, "': ", ec.message()));
  }
  std::unique_ptr<LogBrokerNode> node(new LogBrokerNode());
  auto store = RocksDbLogStore::Open(data_dir + "/broker");
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  node->metrics_ = std::make_unique<api::LogMetrics>(registry);
  node->broker_ = std::make_unique<Broker>(node->store_.get(), clock, node->metrics_.get(), options);
  if (auto s = node->broker_->Recover(); !s.ok()) return s;
  node->service_ = std::make_unique<api::LogService>(node->broker_.get(), node->metrics_.get());
  return node;
}

}  // namespace conduit::log_broker
