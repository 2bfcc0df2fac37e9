#pragma once
// An error a client caused (or an overload it hit), reported in OpenAI's error
// shape with the right HTTP status:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
#include <exception>
#include <string>

#include "tern/core/error.h"

namespace tern::server {

class ApiError : public InvalidArgument {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {},
           std::string code = {})
      : InvalidArgument(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }    // "invalid_request_error", ...
  const std::string& param() const { return param_; }  // offending field, "" if none
  const std::string& code() const { return code_; }    // machine-readable code, "" if none

  // The common cases.
  static ApiError bad_request(const std::string& message, std::string param = {},
                              std::string code = {}) {
    return ApiError(400, "invalid_request_error", message, std::move(param), std::move(code));
  }
  static ApiError not_found(const std::string& message) {
    return ApiError(404, "invalid_request_error", message, {}, "not_found");
  }
  // The one mapping of an exception met while serving a request (every
  // route and the WebSocket protocol use it): an ApiError as it is, any other
  // InvalidArgument (a bad value found deeper down) as a 400, anything else
  // a 500 "Internal error".
  static ApiError from(const std::exception& e) {
    if (const auto* a = dynamic_cast<const ApiError*>(&e)) return *a;
    if (dynamic_cast<const InvalidArgument*>(&e)) return bad_request(e.what());
    return ApiError(500, "server_error", std::string("Internal error: ") + e.what());
  }

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

}  // namespace tern::server
