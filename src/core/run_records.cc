#include "tenax/core/run_records.h"

#include "tenax/core/json_fields.h"

namespace tenax::records {
namespace {

using nlohmann::json;

bool IsKind(const json& j, const char* kind) {
  if (!j.is_object()) return false;
  auto it = j.find("event");
  return it != j.end() && it->is_string() && it->get_ref<const std::string&>() == kind;
}

using json_fields::Number;

int64_t IntegerOr0(const json& j, const char* key) { return json_fields::Integer(j, key).value_or(0); }

double NumberOr(const json& j, const char* key) { return Number(j, key).value_or(0.0); }

// A string as is; anything else "" (a name or state must be text).
std::string String(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

json ToJson(const Train& r) {
  return {{"event", "train"},
          {"epoch", r.epoch},
          {"step", r.step},
          {"loss", r.loss},
          {"samples_per_second", r.samples_per_second},
          {"elapsed_seconds", r.elapsed_seconds}};
}

json ToJson(const Epoch& r) {
  return {{"event", "epoch"},
          {"epoch", r.epoch},
          {"step", r.step},
          {"train_loss", r.train_loss},
          {"test_accuracy", r.test_accuracy},
          {"elapsed_seconds", r.elapsed_seconds}};
}

json ToJson(const Final& r) {
  return {{"event", "final"},
          {"step", r.step},
          {"test_accuracy", r.test_accuracy},
          {"elapsed_seconds", r.elapsed_seconds}};
}

json ToJson(const Notice& r) { return {{"event", "notice"}, {"text", r.text}}; }

json ToJson(const WorkerState& r) {
  return {{"event", "worker_state"}, {"worker", r.worker}, {"state", r.state}, {"host", r.host}, {"detail", r.detail}};
}

std::optional<Train> TrainFrom(const json& j) {
  if (!IsKind(j, "train")) return std::nullopt;
  auto loss = Number(j, "loss");
  if (!loss) return std::nullopt;
  return Train{IntegerOr0(j, "epoch"), IntegerOr0(j, "step"), *loss, NumberOr(j, "samples_per_second"),
               NumberOr(j, "elapsed_seconds")};
}

std::optional<Epoch> EpochFrom(const json& j) {
  if (!IsKind(j, "epoch")) return std::nullopt;
  auto accuracy = Number(j, "test_accuracy");
  if (!accuracy) return std::nullopt;
  return Epoch{IntegerOr0(j, "epoch"), IntegerOr0(j, "step"), NumberOr(j, "train_loss"), *accuracy,
               NumberOr(j, "elapsed_seconds")};
}

std::optional<Final> FinalFrom(const json& j) {
  if (!IsKind(j, "final")) return std::nullopt;
  auto accuracy = Number(j, "test_accuracy");
  if (!accuracy) return std::nullopt;
  return Final{IntegerOr0(j, "step"), *accuracy, NumberOr(j, "elapsed_seconds")};
}

std::optional<Notice> NoticeFrom(const json& j) {
  if (!IsKind(j, "notice")) return std::nullopt;
  std::string text = String(j, "text");
  if (text.empty()) return std::nullopt;
  return Notice{std::move(text)};
}

std::optional<WorkerState> WorkerStateFrom(const json& j) {
  if (!IsKind(j, "worker_state")) return std::nullopt;
  std::string worker = String(j, "worker");
  // Older writers (and the fault records) name a worker by its number.
  if (auto it = j.find("worker"); it != j.end() && it->is_number_integer()) {
    worker = "worker " + std::to_string(it->get<int64_t>());
  }
  if (worker.empty()) return std::nullopt;
  return WorkerState{std::move(worker), String(j, "state"), String(j, "host"), String(j, "detail")};
}

}  // namespace tenax::records
