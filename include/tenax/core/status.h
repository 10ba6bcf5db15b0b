// Errors as values. Every path where a peer, a disk or a user can misbehave
// returns a Status or a Result<T>; exceptions are for programmer errors and
// are converted to Status at library boundaries that call throwing code
// (toml++, libtorch).
//
// Messages name the thing that failed ("train-images-idx3-ubyte.gz: ...",
// "job.toml:12: ..."), so that a user can act on one line.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tenax {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad config, flag or value supplied by the user
  kNotFound,            // a file, key or peer that does not exist
  kDataLoss,            // corrupt or truncated bytes (disk or network)
  kIoError,             // the OS refused a read/write (permissions, disk full)
  kFailedPrecondition,  // the system is not in a state to do this
  kUnavailable,         // a peer or service cannot be reached right now
  kDeadlineExceeded,    // a wait ran past its deadline
  kCancelled,           // stopped by the user (Ctrl-C, SIGTERM)
  kInternal,            // a bug or an unexpected library failure
  kPeerLost,            // a peer process or its link went away mid-conversation
  kRefused,             // a peer refused us (or we it): wrong secret, wrong job
  kProtocolError,       // a peer sent bytes that break the protocol
  kAborted,             // overtaken by a newer state (e.g. a newer membership): retry from it
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: job.toml:3: unknown key 'train.epochz'"
  std::string ToString() const;

  // Returns a copy whose message is "context: message" (same code).
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status DataLoss(std::string msg) { return {StatusCode::kDataLoss, std::move(msg)}; }
inline Status IoError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
inline Status FailedPrecondition(std::string msg) { return {StatusCode::kFailedPrecondition, std::move(msg)}; }
inline Status Cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
inline Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
inline Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
inline Status DeadlineExceeded(std::string msg) { return {StatusCode::kDeadlineExceeded, std::move(msg)}; }
inline Status PeerLost(std::string msg) { return {StatusCode::kPeerLost, std::move(msg)}; }
inline Status Refused(std::string msg) { return {StatusCode::kRefused, std::move(msg)}; }
inline Status ProtocolError(std::string msg) { return {StatusCode::kProtocolError, std::move(msg)}; }
inline Status Aborted(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }

// A value or the Status explaining why there is none. Accessing value() of an
// error Result is a programmer error (asserts).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tenax

#define TENAX_CONCAT_INNER(a, b) a##b
#define TENAX_CONCAT(a, b) TENAX_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define TENAX_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::tenax::Status tenax_status_ = (expr);        \
    if (!tenax_status_.ok()) return tenax_status_; \
  } while (0)

// `TENAX_ASSIGN_OR_RETURN(auto x, Foo());` declares x from a Result or returns
// its Status.
#define TENAX_ASSIGN_OR_RETURN(lhs, expr) TENAX_ASSIGN_OR_RETURN_IMPL(TENAX_CONCAT(tenax_result_, __LINE__), lhs, expr)
#define TENAX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
