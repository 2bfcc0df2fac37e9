#pragma once
// An error a client caused (or an overload it hit), reported in OpenAI's error
// shape with the right HTTP status:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
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

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

}  // namespace tern::server
