//===- ApiError.h - OpenAI's error object -----------------------*- C++ -*-===//
#ifndef KILN_SERVE_APIERROR_H
#define KILN_SERVE_APIERROR_H

#include <string>

namespace kiln::serve {

/// A request refused or failed: the HTTP status and what OpenAI's error
/// object says ({"error": {"message", "type", "param", "code"}}).
struct ApiError {
  int status = 400;
  std::string code;    // "model_not_found", "context_length_exceeded", ...
  std::string param;   // the request field at fault, or empty
  std::string message; // one line
};

/// The response body: OpenAI's error object; the type follows the status
/// (invalid_request_error, authentication_error, rate_limit_error, ...).
std::string errorBody(const ApiError &error);

} // namespace kiln::serve

#endif // KILN_SERVE_APIERROR_H
