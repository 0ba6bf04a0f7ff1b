#include "common/etcd/etcd_client.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/etcd/endpoint.h"
#include "common/etcd/proto_convert.h"
#include "common/etcd/watch_reactor.h"
#include "common/status/status_macros.h"

namespace conduit::etcd {
namespace {

using internal::Endpoint;

int Millis(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              std::min(100, Millis(options.max_reconnect_backoff)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, Millis(options.max_reconnect_backoff));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(options.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(options.keepalive_timeout));
  // Keep pinging an idle watch stream (gRPC stops after 2 pings without data by default).
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetMaxReceiveMessageSize(-1);  // a range answer has no size limit in etcd
  return grpc::CreateCustomChannel(
      address,
      options.credentials != nullptr ? options.credentials : grpc::InsecureChannelCredentials(),
      args);
}

// One unary call on `stub`, bounded by `deadline`; the gRPC status verbatim.
template <typename Stub, typename Request, typename Response>
absl::Status Unary(grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                   Stub& stub, const Request& request, Response* response, absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  return internal::FromGrpc((stub.*method)(&context, request, response));
}

absl::Status LeaseNotFound(LeaseId id) {
  return absl::NotFoundError(
      absl::StrCat("lease ", absl::Hex(id.value()), " not found (expired or revoked)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(std::vector<std::string> endpoints,
                                                        ClientOptions options) {
  if (endpoints.empty()) return absl::InvalidArgumentError("etcd client: no endpoints");
  if (options.request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd client: request timeout must be positive");
  }
  std::vector<std::unique_ptr<Endpoint>> made;
  for (const std::string& given : endpoints) {
    absl::string_view address = given;
    const bool tls = options.credentials != nullptr;
    if (absl::ConsumePrefix(&address, "https://") && !tls) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", given, "': https needs TLS credentials (--etcd-tls-ca)"));
    }
    if (absl::ConsumePrefix(&address, "http://") && tls) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", given, "': http, but TLS credentials are set"));
    }
    if (address.empty()) return absl::InvalidArgumentError("etcd client: empty endpoint");
    auto endpoint = std::make_unique<Endpoint>();
    endpoint->address = std::string(address);
    endpoint->channel = MakeChannel(endpoint->address, options);
    endpoint->kv = etcdserverpb::KV::NewStub(endpoint->channel);
    endpoint->lease = etcdserverpb::Lease::NewStub(endpoint->channel);
    endpoint->watch = etcdserverpb::Watch::NewStub(endpoint->channel);
    made.push_back(std::move(endpoint));
  }
  return std::unique_ptr<Client>(new Client(std::move(made), options));
}

Client::Client(std::vector<std::unique_ptr<Endpoint>> endpoints, ClientOptions options)
    : endpoints_(std::move(endpoints)), options_(options) {}

Client::~Client() = default;

absl::Duration Client::AttemptTimeout() const {
  return options_.request_timeout / static_cast<int64_t>(endpoints_.size());
}

absl::Status Client::Invoke(absl::string_view what, bool repeatable,
                            const std::function<absl::Status(Endpoint&, absl::Time)>& call) {
  const absl::Time started = absl::Now();
  absl::Status status = InvokeOnEndpoints(what, repeatable, call);
  if (options_.on_request) options_.on_request(what, absl::Now() - started, status);
  return status;
}

absl::Status Client::InvokeOnEndpoints(
    absl::string_view what, bool repeatable,
    const std::function<absl::Status(Endpoint&, absl::Time)>& call) {
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  const size_t first = preferred_.load(std::memory_order_relaxed);
  absl::Status last;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t index = (first + i) % endpoints_.size();
    Endpoint& endpoint = *endpoints_[index];
    const absl::Time attempt_deadline = std::min(deadline, absl::Now() + AttemptTimeout());
    if (!internal::WaitConnected(*endpoint.channel, attempt_deadline)) {
      // Nothing was sent: safe to try the next endpoint even for a change.
      last = internal::Unreachable(
          endpoint.address,
          absl::StrCat("no connection within ", absl::FormatDuration(AttemptTimeout())));
      continue;
    }
    absl::Status status = call(endpoint, attempt_deadline);
    if (status.ok()) {
      preferred_.store(index, std::memory_order_relaxed);
      return status;
    }
    if (!internal::IsUnreachable(status)) {
      return absl::Status(status.code(), absl::StrCat("etcd ", what, ": ", status.message()));
    }
    if (!repeatable) {
      return internal::Unreachable(
          endpoint.address, absl::StrCat(status.message(), " (the ", what, " may have applied)"));
    }
    last = internal::Unreachable(endpoint.address, status.message());
  }
  return last;
}

absl::StatusOr<RangeResult> Client::Range(absl::string_view key, bool prefix) {
  etcdserverpb::RangeRequest request;
  internal::SetRange(key, prefix, request.mutable_key(), request.mutable_range_end());
  etcdserverpb::RangeResponse response;
  CONDUIT_RETURN_IF_ERROR(Invoke("Range", /*repeatable=*/true, [&](Endpoint& e, absl::Time d) {
    return Unary(&etcdserverpb::KV::Stub::Range, *e.kv, request, &response, d);
  }));
  return internal::FromProto(response);
}

absl::StatusOr<RangeResult> Client::Get(absl::string_view key) { return Range(key, false); }

absl::StatusOr<RangeResult> Client::GetPrefix(absl::string_view prefix) {
  return Range(prefix, true);
}

absl::StatusOr<int64_t> Client::Put(absl::string_view key, absl::string_view value, LeaseId lease) {
  etcdserverpb::PutRequest request;
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  request.set_lease(lease.value());
  etcdserverpb::PutResponse response;
  CONDUIT_RETURN_IF_ERROR(Invoke("Put", /*repeatable=*/false, [&](Endpoint& e, absl::Time d) {
    return Unary(&etcdserverpb::KV::Stub::Put, *e.kv, request, &response, d);
  }));
  return response.header().revision();
}

absl::StatusOr<DeleteResult> Client::DeleteRange(absl::string_view key, bool prefix) {
  if (prefix && key.empty()) {
    return absl::InvalidArgumentError("etcd DeletePrefix: refusing to delete every key");
  }
  etcdserverpb::DeleteRangeRequest request;
  internal::SetRange(key, prefix, request.mutable_key(), request.mutable_range_end());
  etcdserverpb::DeleteRangeResponse response;
  CONDUIT_RETURN_IF_ERROR(
      Invoke("DeleteRange", /*repeatable=*/false, [&](Endpoint& e, absl::Time d) {
        return Unary(&etcdserverpb::KV::Stub::DeleteRange, *e.kv, request, &response, d);
      }));
  return DeleteResult{response.deleted(), response.header().revision()};
}

absl::StatusOr<DeleteResult> Client::Delete(absl::string_view key) {
  return DeleteRange(key, false);
}

absl::StatusOr<DeleteResult> Client::DeletePrefix(absl::string_view prefix) {
  return DeleteRange(prefix, true);
}

absl::StatusOr<TxnResult> Client::Commit(const Txn& txn) {
  const etcdserverpb::TxnRequest request = internal::ToProto(txn);
  etcdserverpb::TxnResponse response;
  CONDUIT_RETURN_IF_ERROR(Invoke("Txn", /*repeatable=*/false, [&](Endpoint& e, absl::Time d) {
    return Unary(&etcdserverpb::KV::Stub::Txn, *e.kv, request, &response, d);
  }));
  return internal::FromProto(response);
}

absl::Status Client::Compact(int64_t revision) {
  etcdserverpb::CompactionRequest request;
  request.set_revision(revision);
  etcdserverpb::CompactionResponse response;
  return Invoke("Compact", /*repeatable=*/false, [&](Endpoint& e, absl::Time d) {
    return Unary(&etcdserverpb::KV::Stub::Compact, *e.kv, request, &response, d);
  });
}

absl::StatusOr<Lease> Client::Grant(int64_t ttl_seconds) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse response;
  CONDUIT_RETURN_IF_ERROR(
      Invoke("LeaseGrant", /*repeatable=*/false, [&](Endpoint& e, absl::Time d) {
        return Unary(&etcdserverpb::Lease::Stub::LeaseGrant, *e.lease, request, &response, d);
      }));
  return Lease{LeaseId(response.id()), response.ttl()};
}

absl::StatusOr<int64_t> Client::KeepAliveOnce(LeaseId id) {
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(id.value());
  etcdserverpb::LeaseKeepAliveResponse response;
  // Renewing twice is harmless, so the call may move to another endpoint after any failure.
  CONDUIT_RETURN_IF_ERROR(
      Invoke("LeaseKeepAlive", /*repeatable=*/true, [&](Endpoint& e, absl::Time d) {
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(d));
        context.AddMetadata(std::string(internal::kRequireLeaderKey),
                            std::string(internal::kRequireLeaderValue));
        auto stream = e.lease->LeaseKeepAlive(&context);
        const bool answered = stream->Write(request) && stream->Read(&response);
        stream->WritesDone();
        absl::Status status = internal::FromGrpc(stream->Finish());
        if (status.ok() && !answered) {
          return absl::UnavailableError("keep-alive stream ended without an answer");
        }
        return status;
      }));
  if (response.ttl() <= 0) return LeaseNotFound(id);  // etcd's "gone": a TTL of 0
  return response.ttl();
}

absl::Status Client::Revoke(LeaseId id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id.value());
  etcdserverpb::LeaseRevokeResponse response;
  absl::Status status = Invoke("LeaseRevoke", /*repeatable=*/false, [&](Endpoint& e, absl::Time d) {
    return Unary(&etcdserverpb::Lease::Stub::LeaseRevoke, *e.lease, request, &response, d);
  });
  return absl::IsNotFound(status) ? LeaseNotFound(id) : status;
}

absl::StatusOr<LeaseInfo> Client::TimeToLive(LeaseId id, bool with_keys) {
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(id.value());
  request.set_keys(with_keys);
  etcdserverpb::LeaseTimeToLiveResponse response;
  CONDUIT_RETURN_IF_ERROR(
      Invoke("LeaseTimeToLive", /*repeatable=*/true, [&](Endpoint& e, absl::Time d) {
        return Unary(&etcdserverpb::Lease::Stub::LeaseTimeToLive, *e.lease, request, &response, d);
      }));
  if (response.ttl() < 0) return LeaseNotFound(id);  // etcd's "gone": a TTL of -1
  LeaseInfo info{id, response.ttl(), response.grantedttl(), {}};
  info.keys.assign(response.keys().begin(), response.keys().end());
  return info;
}

absl::StatusOr<std::unique_ptr<WatchHandle>> Client::WatchKey(absl::string_view key,
                                                              int64_t start_revision,
                                                              WatchHandlers handlers) {
  return Watch(key, false, start_revision, std::move(handlers));
}

absl::StatusOr<std::unique_ptr<WatchHandle>> Client::WatchPrefix(absl::string_view prefix,
                                                                 int64_t start_revision,
                                                                 WatchHandlers handlers) {
  return Watch(prefix, true, start_revision, std::move(handlers));
}

absl::StatusOr<std::unique_ptr<WatchHandle>> Client::Watch(absl::string_view key, bool prefix,
                                                           int64_t start_revision,
                                                           WatchHandlers handlers) {
  if (!handlers.on_events || !handlers.on_compacted || !handlers.on_ended) {
    return absl::InvalidArgumentError(
        "etcd Watch: on_events, on_compacted and on_ended must all be set");
  }
  etcdserverpb::WatchRequest request;
  etcdserverpb::WatchCreateRequest* create = request.mutable_create_request();
  internal::SetRange(key, prefix, create->mutable_key(), create->mutable_range_end());
  create->set_start_revision(start_revision);
  std::unique_ptr<internal::WatchReactor> reactor;
  // Creating a watch changes nothing in etcd: safe to repeat on another endpoint.
  CONDUIT_RETURN_IF_ERROR(Invoke("Watch", /*repeatable=*/true, [&](Endpoint& e, absl::Time d) {
    reactor = std::make_unique<internal::WatchReactor>(e.address, request, handlers);
    reactor->Start(*e.watch);
    absl::Status status = reactor->AwaitCreated(d);
    if (!status.ok()) {
      reactor->Cancel();
      reactor.reset();
    }
    return status;
  }));
  return std::make_unique<WatchHandle>(std::move(reactor));
}

}  // namespace conduit::etcd
