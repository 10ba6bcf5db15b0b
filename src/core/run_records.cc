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

std::optional<double> OptNumber(const json& j, const char* key) { return Number(j, key); }
std::optional<int64_t> OptInteger(const json& j, const char* key) { return json_fields::Integer(j, key); }

// Writes `key` only when the optional holds a value: absent stays absent.
template <typename T>
void Put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}
void PutText(json& j, const char* key, const std::string& v) {
  if (!v.empty()) j[key] = v;
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

json ToJson(const Fault& r) {
  json j = {{"event", r.fired ? "fault" : "fault_not_fired"}, {"action", r.action}};
  Put(j, "worker", r.worker);
  Put(j, "joiner", r.joiner);
  Put(j, "server", r.server);
  PutText(j, "storage", r.storage);
  if (r.coordinator) j["coordinator"] = true;
  j["elapsed_seconds"] = r.elapsed_seconds;
  j["step"] = r.step;
  j["source"] = r.source;
  Put(j, "at_seconds", r.at_seconds);
  Put(j, "at_step", r.at_step);
  PutText(j, "signal", r.signal);
  Put(j, "pid", r.pid);
  Put(j, "grace_seconds", r.grace_seconds);
  Put(j, "delay_seconds", r.delay_seconds);
  PutText(j, "reason", r.reason);
  Put(j, "wiped", r.wiped);
  PutText(j, "wipe_error", r.wipe_error);
  if (!r.hosts.empty()) j["hosts"] = r.hosts;
  Put(j, "seconds", r.seconds);
  Put(j, "factor", r.factor);
  Put(j, "delay_ms", r.delay_ms);
  return j;
}

std::string TargetName(const Fault& f) {
  if (f.worker) return "worker " + std::to_string(*f.worker);
  if (f.joiner) return "joiner " + std::to_string(*f.joiner);
  if (f.server) return "server " + std::to_string(*f.server);
  if (!f.storage.empty()) return "storage " + f.storage;
  if (f.coordinator) return "the coordinator";
  if (f.hosts.size() == 2) return "the link " + f.hosts[0] + "-" + f.hosts[1];
  if (f.hosts.size() == 1) return "host " + f.hosts[0] + (f.action == "slow_host" ? " (every link)" : " (from its zone)");
  return "";
}

std::optional<Fault> FaultFrom(const json& j) {
  const bool fired = IsKind(j, "fault");
  if (!fired && !IsKind(j, "fault_not_fired")) return std::nullopt;
  Fault f;
  f.fired = fired;
  f.action = json_fields::Text(j, "action");  // a number as its text: shown, not dropped
  if (f.action.empty()) return std::nullopt;
  f.worker = OptInteger(j, "worker");
  f.joiner = OptInteger(j, "joiner");
  f.server = OptInteger(j, "server");
  f.storage = String(j, "storage");
  if (auto it = j.find("coordinator"); it != j.end() && it->is_boolean()) f.coordinator = it->get<bool>();
  f.elapsed_seconds = NumberOr(j, "elapsed_seconds");
  f.step = IntegerOr0(j, "step");
  f.source = String(j, "source");
  f.at_seconds = OptNumber(j, "at_seconds");
  f.at_step = OptInteger(j, "at_step");
  f.signal = String(j, "signal");
  f.pid = OptInteger(j, "pid");
  f.grace_seconds = OptNumber(j, "grace_seconds");
  f.delay_seconds = OptNumber(j, "delay_seconds");
  f.reason = String(j, "reason");
  f.wiped = json_fields::Flag(j, "wiped");
  f.wipe_error = String(j, "wipe_error");
  if (auto it = j.find("hosts"); it != j.end() && it->is_array() && it->size() <= 2) {
    for (const auto& h : *it) {
      if (h.is_string()) f.hosts.push_back(h.get<std::string>());
    }
  }
  f.seconds = OptNumber(j, "seconds");
  f.factor = OptNumber(j, "factor");
  f.delay_ms = OptNumber(j, "delay_ms");
  return f;
}

json ToJson(const Straggler& r) {
  json j = {{"event", "straggler"}, {"state", r.slow ? "slow" : "recovered"}};
  PutText(j, "member", r.member);
  Put(j, "member_id", r.member_id);
  Put(j, "rank", r.rank);
  Put(j, "worker", r.worker);
  Put(j, "pid", r.pid);
  j["step"] = r.step;
  j["ratio"] = r.ratio;
  Put(j, "share", r.share);
  Put(j, "global_batch", r.global_batch);
  return j;
}

std::optional<Straggler> StragglerFrom(const json& j) {
  Straggler s;
  if (IsKind(j, "straggler")) {
    const std::string state = String(j, "state");
    if (state != "slow" && state != "recovered") return std::nullopt;
    s.slow = state == "slow";
  } else if (IsKind(j, "straggler_detected") || IsKind(j, "straggler_recovered")) {
    s.slow = IsKind(j, "straggler_detected");
  } else {
    return std::nullopt;
  }
  s.member = String(j, "member");
  s.member_id = OptInteger(j, "member_id");
  s.rank = OptInteger(j, "rank");
  s.worker = OptInteger(j, "worker");
  s.pid = OptInteger(j, "pid");
  s.step = IntegerOr0(j, "step");
  s.ratio = NumberOr(j, "ratio");
  s.share = OptInteger(j, "share");
  s.global_batch = OptInteger(j, "global_batch");
  return s;
}

json ToJson(const Generation& r) {
  json j = {{"event", "generation"},
            {"number", r.number},
            {"first_step", r.first_step},
            {"members", r.members},
            {"why", r.why}};
  Put(j, "detect_ms", r.detect_ms);
  Put(j, "reform_ms", r.reform_ms);
  Put(j, "join_transfer_ms", r.join_transfer_ms);
  return j;
}

std::optional<Generation> GenerationFrom(const json& j) {
  if (!IsKind(j, "generation")) return std::nullopt;
  auto number = OptInteger(j, "number");
  if (!number) return std::nullopt;
  Generation g;
  g.number = *number;
  g.first_step = IntegerOr0(j, "first_step");
  if (auto it = j.find("members"); it != j.end() && it->is_array()) {
    for (const json& m : *it) {
      if (m.is_number_integer()) g.members.push_back(m.get<int64_t>());
    }
  }
  g.why = String(j, "why");
  g.detect_ms = OptNumber(j, "detect_ms");
  g.reform_ms = OptNumber(j, "reform_ms");
  g.join_transfer_ms = OptNumber(j, "join_transfer_ms");
  return g;
}

json ToJson(const Recovery& r) {
  json j = {{"event", "recovery"}, {"phase", r.phase}, {"dataset", r.dataset}, {"policy", r.policy}};
  if (r.phase == "started") return j;
  j.update({{"lost_chunks", r.lost_chunks},
            {"first_chunks", r.first_chunks},
            {"later_chunks", r.later_chunks},
            {"chunks_rebuilt", r.chunks_rebuilt},
            {"unrecoverable", r.unrecoverable},
            {"bytes_read", r.bytes_read},
            {"bytes_written", r.bytes_written},
            {"bytes", r.bytes},
            {"first_pass_seconds", r.first_pass_seconds},
            {"background_seconds", r.background_seconds},
            {"seconds", r.seconds}});
  PutText(j, "error", r.error);
  return j;
}

std::optional<Recovery> RecoveryFrom(const json& j) {
  if (!IsKind(j, "recovery")) return std::nullopt;
  Recovery r;
  r.phase = String(j, "phase");
  if (r.phase.empty()) return std::nullopt;
  r.dataset = String(j, "dataset");
  r.policy = String(j, "policy");
  r.lost_chunks = IntegerOr0(j, "lost_chunks");
  r.first_chunks = IntegerOr0(j, "first_chunks");
  r.later_chunks = IntegerOr0(j, "later_chunks");
  r.chunks_rebuilt = IntegerOr0(j, "chunks_rebuilt");
  if (auto it = j.find("unrecoverable"); it != j.end() && it->is_array()) {
    for (const json& u : *it) {
      if (u.is_string()) r.unrecoverable.push_back(u.get<std::string>());
    }
  }
  r.bytes_read = IntegerOr0(j, "bytes_read");
  r.bytes_written = IntegerOr0(j, "bytes_written");
  r.bytes = IntegerOr0(j, "bytes");
  r.first_pass_seconds = NumberOr(j, "first_pass_seconds");
  r.background_seconds = NumberOr(j, "background_seconds");
  r.seconds = NumberOr(j, "seconds");
  r.error = String(j, "error");
  return r;
}

json ToJson(const Shuffle& r) {
  return {{"event", "shuffle"},
          {"step", r.step},
          {"rows", r.rows},
          {"partitions_moved", r.partitions_moved},
          {"bytes_moved", r.bytes_moved}};
}

std::optional<Shuffle> ShuffleFrom(const json& j) {
  if (!IsKind(j, "shuffle")) return std::nullopt;
  auto step = OptInteger(j, "step");
  if (!step) return std::nullopt;
  Shuffle s;
  s.step = *step;
  if (auto it = j.find("rows"); it != j.end() && it->is_array()) s.rows = *it;
  s.partitions_moved = IntegerOr0(j, "partitions_moved");
  s.bytes_moved = IntegerOr0(j, "bytes_moved");
  return s;
}

}  // namespace tenax::records
