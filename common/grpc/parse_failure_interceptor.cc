#include "common/grpc/parse_failure_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/interceptor.h>

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/rpc_type.h"

namespace conduit::grpc_util {
namespace {

using grpc::experimental::InterceptionHookPoints;

class ParseFailureInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit ParseFailureInterceptor(const google::protobuf::MethodDescriptor* method)
      : method_(method) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
          status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("request could not be parsed as ", method_->input_type()->full_name(),
                         " (malformed protobuf bytes, or a string field that is not valid "
                         "UTF-8)")));
      }
    }
    methods->Proceed();
  }

 private:
  const google::protobuf::MethodDescriptor* const method_;
};

class ParseFailureInterceptorFactoryImpl
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ParseFailureInterceptorFactoryImpl(std::vector<std::string> services)
      : services_(services.begin(), services.end()) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (ReadsAStream(info->type())) return nullptr;
    const google::protobuf::MethodDescriptor* method = FindMethod(info->method());
    if (method == nullptr || !services_.contains(method->service()->full_name())) return nullptr;
    return new ParseFailureInterceptor(method);
  }

 private:
  const absl::flat_hash_set<std::string> services_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ParseFailureInterceptorFactory(std::vector<std::string> services) {
  return std::make_unique<ParseFailureInterceptorFactoryImpl>(std::move(services));
}

}  // namespace conduit::grpc_util
