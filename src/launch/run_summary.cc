#include "run_summary.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "tenax/core/run_dir.h"

namespace tenax {

Result<nlohmann::json> ReadJobSummary(const std::string& out_dir) {
  std::ifstream in(RunDir(out_dir).summary());
  nlohmann::json summary = nlohmann::json::parse(in, nullptr, false);
  if (summary.is_discarded() || !summary.is_object()) {
    return Internal(RunDir(out_dir).summary() + " is missing or unreadable after the job finished");
  }
  return summary;
}

nlohmann::json BytesMoved(const nlohmann::json& summary, double recovery_bytes) {
  const double gradient = 4.0 * static_cast<double>(summary.value("parameters", int64_t{0}));
  const int64_t steps = summary.value("steps", int64_t{0});
  double gradients = 0, models = 0;
  const auto generations = summary.value("generations", nlohmann::json::array());
  if (generations.empty()) {
    const double w = static_cast<double>(summary.value("workers", int64_t{1}));
    gradients = static_cast<double>(steps) * 2 * (w - 1) * gradient;
  }
  for (size_t i = 0; i < generations.size(); ++i) {
    const auto& g = generations[i];
    const int64_t first = g.value("first_step", int64_t{0});
    const int64_t last = i + 1 < generations.size() ? generations[i + 1].value("first_step", steps) : steps;
    const double w = static_cast<double>(g.value("members", nlohmann::json::array()).size());
    gradients += static_cast<double>(std::max<int64_t>(0, last - first)) * 2 * std::max(0.0, w - 1) * gradient;
    if (g.contains("join_transfer_ms")) models += 2 * gradient;  // parameters + SGD momentum, one joiner
  }
  const double recovery = recovery_bytes;
  const double shuffling = summary.value("coded", nlohmann::json::object()).value("bytes_shuffled", 0.0);
  return {{"gradients", gradients}, {"models", models}, {"recovery", recovery}, {"shuffling", shuffling}};
}

std::string AccuracyAgainstReference(const nlohmann::json& summary) {
  const double run = summary.value("final_test_accuracy", 0.0), ref = summary.value("reference_test_accuracy", 0.0);
  return fmt::format("test accuracy {:.4f} against {:.4f} without faults ({:+.2f} points)", run, ref,
                     100 * (run - ref));
}

nlohmann::json MergeFaultRecords(const nlohmann::json& executed, const nlohmann::json& reactions) {
  nlohmann::json listed = nlohmann::json::array();
  for (size_t i = 0; i < reactions.size(); ++i) {
    nlohmann::json f = i < executed.size() ? executed[i] : reactions[i];
    // Only keys the reaction has: operator[] of a const json on a missing
    // key is undefined behaviour (a worker's own failure has no "step"; it
    // once wrote `"step": ,` into summary.json and crashed `tenax run`).
    const nlohmann::json& r = reactions[i];
    for (const char* key : {"fault", "target", "reaction", "recovered", "recovered_seconds", "time"}) {
      if (r.contains(key)) f[key] = r.at(key);
    }
    if (!f.contains("action") && r.contains("action")) f["action"] = r.at("action");
    if (!f.contains("step") && r.contains("step")) f["step"] = r.at("step");
    listed.push_back(std::move(f));
  }
  return listed;
}

}  // namespace tenax
