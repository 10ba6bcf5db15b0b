#include "tenax/ps/result_validator.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "tenax/core/number_text.h"

namespace tenax::ps {
namespace {

std::string Num(double v) { return NumberText(v); }

}  // namespace

Status ValidateValidatorOptions(const ValidatorOptions& o) {
  if (!std::isfinite(o.norm_factor) || o.norm_factor <= 1) {
    return InvalidArgument("async.norm_factor must be > 1 (got " + Num(o.norm_factor) + ")");
  }
  if (o.warmup < 1) return InvalidArgument("the validator's warm-up must be >= 1 (got " + std::to_string(o.warmup) + ")");
  if (o.window < o.warmup) {
    return InvalidArgument("the validator's window (" + std::to_string(o.window) + ") must be >= its warm-up (" +
                           std::to_string(o.warmup) + ")");
  }
  return Status::Ok();
}

double UpdateNorm(ResultKind kind, std::span<const float> result, std::span<const float> model) {
  double sum = 0;
  if (kind == ResultKind::kModel) {
    if (result.size() != model.size()) return std::nan("");
    for (size_t i = 0; i < result.size(); ++i) {
      const double d = static_cast<double>(result[i]) - static_cast<double>(model[i]);
      sum += d * d;
    }
  } else {
    for (float v : result) sum += static_cast<double>(v) * static_cast<double>(v);
  }
  return std::isfinite(sum) ? std::sqrt(sum) : std::nan("");
}

ResultValidator::ResultValidator(ValidatorOptions options) : options_(options) {}

Status ResultValidator::Check(std::span<const float> result, size_t expected_size, double update_norm) const {
  if (result.size() != expected_size) {
    return InvalidArgument("result of " + std::to_string(result.size()) + " floats, expected " +
                           std::to_string(expected_size));
  }
  for (size_t i = 0; i < result.size(); ++i) {
    if (!std::isfinite(result[i])) {
      return InvalidArgument(std::string(std::isnan(result[i]) ? "NaN" : "Inf") + " at index " + std::to_string(i));
    }
  }
  if (!std::isfinite(update_norm)) return InvalidArgument("update norm is not finite (" + Num(update_norm) + ")");
  if (accepted_ >= options_.warmup) {
    const double m = median();
    if (m > 0 && update_norm > m * options_.norm_factor) {
      return InvalidArgument("update norm " + Num(update_norm) + " is " + Num(update_norm / m) + "x the median " +
                             Num(m) + " of the last " + std::to_string(recent_.size()) +
                             " accepted results (limit " + Num(options_.norm_factor) + "x)");
    }
  }
  return Status::Ok();
}

void ResultValidator::RecordAccepted(double update_norm) {
  if (!std::isfinite(update_norm)) return;
  recent_.push_back(update_norm);
  while (static_cast<int>(recent_.size()) > options_.window) recent_.pop_front();
  ++accepted_;
}

double ResultValidator::median() const {
  if (recent_.empty()) return 0;
  std::vector<double> v(recent_.begin(), recent_.end());
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

}  // namespace tenax::ps
