// The project's one result vocabulary: a CUresult plus a sentence saying why (Status), and a value
// or such a Status (Result<T>). The CUresult is what a real driver would return for the same
// failure; the message is detail for logs and never replaces the code.
#pragma once

#include <cuda.h>

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gpupool {

struct Status {
  CUresult code = CUDA_SUCCESS;
  std::string message;  // detail for the client's log; empty on success

  bool ok() const { return code == CUDA_SUCCESS; }
  static Status success() { return {}; }
  static Status error(CUresult code, std::string message) { return {code, std::move(message)}; }
};

// A T, or the Status (never a success) that says why there is none. C++20 has no std::expected.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  Result(Status failure) : state_(std::in_place_index<1>, std::move(failure)) {
    assert(!std::get<1>(state_).ok() && "a Result holds a value or a failure");
  }

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // The value; only when ok().
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // Why there is no value; Status::success() when there is one.
  const Status& status() const {
    static const Status kSuccess;
    return ok() ? kSuccess : std::get<1>(state_);
  }

 private:
  std::variant<T, Status> state_;
};

}  // namespace gpupool
