#include "tenax/ps/merge_rule.h"

#include <cassert>
#include <cmath>
#include <sstream>

#include "tenax/core/number_text.h"

namespace tenax::ps {
namespace {

std::string Num(double v) { return NumberText(v); }

// 1/(1+s)^p: how much a result `s` merges stale still counts.
double StalenessScale(const MergeParams& p, int64_t staleness) {
  return 1.0 / std::pow(1.0 + static_cast<double>(staleness), p.staleness_power);
}

void CheckInput(std::span<float> model, const MergeInput& in) {
  assert(in.result.size() == model.size());
  assert(in.staleness >= 0 && in.unit_steps >= 1 && in.steps_done >= 1 && in.steps_done <= in.unit_steps);
  (void)model;
  (void)in;
}

class VcAsgd final : public MergeRule {
 public:
  explicit VcAsgd(MergeParams p) : p_(std::move(p)) {}
  ResultKind expects() const override { return ResultKind::kModel; }
  const char* name() const override { return "vc_asgd"; }
  double Weight(const MergeInput& in) const override {
    const double f = static_cast<double>(in.steps_done) / static_cast<double>(in.unit_steps);
    return (1.0 - p_.alpha) * f * StalenessScale(p_, in.staleness);  // 1 - a
  }
  void Apply(std::span<float> model, const MergeInput& in) const override {
    CheckInput(model, in);
    const float w = static_cast<float>(Weight(in)), keep = 1.0f - w;
    const float* r = in.result.data();
    float* m = model.data();
    for (size_t i = 0, n = model.size(); i < n; ++i) m[i] = keep * m[i] + w * r[i];
  }

 private:
  MergeParams p_;
};

class Delta final : public MergeRule {
 public:
  explicit Delta(MergeParams p) : p_(std::move(p)) {}
  ResultKind expects() const override { return ResultKind::kDelta; }
  const char* name() const override { return "delta"; }
  double Weight(const MergeInput& in) const override { return StalenessScale(p_, in.staleness); }
  void Apply(std::span<float> model, const MergeInput& in) const override {
    CheckInput(model, in);
    const float w = static_cast<float>(Weight(in));
    const float* r = in.result.data();
    float* m = model.data();
    for (size_t i = 0, n = model.size(); i < n; ++i) m[i] += w * r[i];
  }

 private:
  MergeParams p_;
};

class Asgd final : public MergeRule {
 public:
  explicit Asgd(MergeParams p) : p_(std::move(p)) {}
  ResultKind expects() const override { return ResultKind::kGradientSum; }
  const char* name() const override { return "asgd"; }
  double Weight(const MergeInput& in) const override { return StalenessScale(p_, in.staleness); }
  void Apply(std::span<float> model, const MergeInput& in) const override {
    CheckInput(model, in);
    const float step = static_cast<float>(p_.lr * Weight(in));
    const float* r = in.result.data();
    float* m = model.data();
    for (size_t i = 0, n = model.size(); i < n; ++i) m[i] -= step * r[i];
  }

 private:
  MergeParams p_;
};

}  // namespace

const char* ToString(ResultKind kind) {
  switch (kind) {
    case ResultKind::kModel:
      return "model";
    case ResultKind::kDelta:
      return "delta";
    case ResultKind::kGradientSum:
      return "gradient_sum";
  }
  return "unknown";
}

Status ValidateMergeParams(const MergeParams& p) {
  if (p.rule != "vc_asgd" && p.rule != "delta" && p.rule != "asgd") {
    return InvalidArgument("async.rule must be one of vc_asgd, delta, asgd (got \"" + p.rule.substr(0, 64) + "\")");
  }
  if (!std::isfinite(p.alpha) || p.alpha < 0 || p.alpha >= 1) {
    return InvalidArgument("async.alpha must be in [0, 1) (got " + Num(p.alpha) + ")");
  }
  if (!std::isfinite(p.staleness_power) || p.staleness_power < 0 || p.staleness_power > 4) {
    return InvalidArgument("async.staleness_power must be in [0, 4] (got " + Num(p.staleness_power) + ")");
  }
  if (!std::isfinite(p.lr) || p.lr <= 0 || p.lr > 10) {
    return InvalidArgument("async.server_lr must be in (0, 10] (got " + Num(p.lr) + ")");
  }
  return Status::Ok();
}

Result<std::unique_ptr<MergeRule>> MakeMergeRule(const MergeParams& p) {
  TENAX_RETURN_IF_ERROR(ValidateMergeParams(p));
  if (p.rule == "delta") return std::unique_ptr<MergeRule>(std::make_unique<Delta>(p));
  if (p.rule == "asgd") return std::unique_ptr<MergeRule>(std::make_unique<Asgd>(p));
  return std::unique_ptr<MergeRule>(std::make_unique<VcAsgd>(p));
}

}  // namespace tenax::ps
