#include "tenax/report/run_record.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "tenax/core/files.h"
#include "tenax/core/run_dir.h"
#include "tenax/core/run_records.h"
#include "format.h"
#include "json_fields.h"

namespace tenax::report {
namespace {

using nlohmann::json;

constexpr size_t kMaxFileBytes = size_t{1} << 30;  // a metrics.jsonl of a very long run
constexpr size_t kMaxWarnings = 8;

// Warnings beyond the first few are counted, not listed: a file of garbage
// should not make a report of garbage.
class Warnings {
 public:
  explicit Warnings(std::vector<std::string>* out) : out_(out) {}
  ~Warnings() {
    if (dropped_ > 0) out_->push_back("... and " + std::to_string(dropped_) + " more lines like these");
  }
  void Add(std::string text) {
    if (out_->size() < kMaxWarnings) {
      out_->push_back(std::move(text));
    } else {
      ++dropped_;
    }
  }

 private:
  std::vector<std::string>* out_;
  size_t dropped_ = 0;
};

struct Record {
  json j;
  std::optional<double> time;     // "time": unix seconds
  std::optional<double> elapsed;  // "elapsed_seconds"
  double t = 0;                   // seconds since the run's start, set by Place()
};

// One JSON object per line; anything else is skipped with a warning naming
// the line (a truncated last line is the normal state of a killed run).
std::vector<Record> ParseLines(const std::string& text, const std::string& file, Warnings& warnings) {
  std::vector<Record> out;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const bool last = nl == std::string::npos;
    std::string_view line(text.data() + pos, (last ? text.size() : nl) - pos);
    pos = last ? text.size() : nl + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    if (line.empty()) continue;
    json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      warnings.Add(file + " line " + std::to_string(line_no) +
                   (last ? " is truncated (the run was stopped while writing it); ignored"
                         : " is not a JSON object; ignored"));
      continue;
    }
    Record r;
    r.time = Number(j, "time");
    r.elapsed = Number(j, "elapsed_seconds");
    r.j = std::move(j);
    out.push_back(std::move(r));
  }
  return out;
}

// Puts every record on the time axis: "time" minus the start when the record
// has one, else its elapsed_seconds, else the time of the record before it
// (records are written in order, so that keeps the order). Returns the
// start (unix seconds; infinite when no record has a time).
double Place(std::vector<Record>& records, std::optional<double> started_at) {
  double start = std::numeric_limits<double>::infinity();
  if (started_at) {
    start = *started_at;
  } else {
    for (const Record& r : records) {
      if (r.time) start = std::min(start, *r.time);
    }
  }
  double previous = 0;
  for (Record& r : records) {
    double t = previous;
    if (r.time && std::isfinite(start)) {
      t = *r.time - start;
    } else if (r.elapsed) {
      t = *r.elapsed;
    }
    if (!std::isfinite(t) || t < 0) t = 0;
    r.t = previous = t;
  }
  return start;
}

void SortByTime(std::vector<TimePoint>& points) {
  std::stable_sort(points.begin(), points.end(), [](const TimePoint& a, const TimePoint& b) { return a.t < b.t; });
}

Curves CurvesOf(const std::vector<Record>& records) {
  Curves c;
  for (const Record& r : records) {
    c.end_seconds = std::max(c.end_seconds, r.t);
    if (auto train = records::TrainFrom(r.j)) {
      c.train_loss.push_back({r.t, train->loss});
    } else if (auto epoch = records::EpochFrom(r.j)) {
      c.test_accuracy.push_back({r.t, epoch->test_accuracy});
    } else if (auto final_model = records::FinalFrom(r.j)) {
      c.test_accuracy.push_back({r.t, final_model->test_accuracy});
    }
  }
  SortByTime(c.train_loss);
  SortByTime(c.test_accuracy);
  return c;
}

// "worker 3" for {"worker": 3} or {"worker": "worker 3"}; the same for
// joiners, servers and storage nodes ("storage node-2").
std::string TargetOf(const json& j) {
  for (const char* key : {"worker", "joiner", "server"}) {
    if (!j.contains(key)) continue;
    const json& v = j[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return std::string(key) + " " + Text(j, key);
  }
  if (std::string s = Text(j, "storage"); !s.empty()) return "storage " + s;
  return Text(j, "target");
}

std::string FaultText(const records::Fault& f) {
  std::string text = f.action;
  if (std::string target = records::TargetName(f); !target.empty()) text += " " + target;
  if (!f.signal.empty()) text += " (" + f.signal + ")";
  if (f.step > 0) text += " at step " + std::to_string(f.step);
  if (f.wiped.value_or(false)) text += ", its data wiped";
  if (!f.reason.empty()) text += ": " + f.reason;
  return text;
}

// Which worker had which pid: the launcher's first state of each worker
// says "pid N" (launch/run_monitor.cc AddWorker).
using WorkerOfPid = std::map<int64_t, std::string>;
WorkerOfPid WorkersByPid(const std::vector<Record>& records) {
  WorkerOfPid out;
  for (const Record& r : records) {
    auto ws = records::WorkerStateFrom(r.j);
    if (!ws || ws->detail.rfind("pid ", 0) != 0) continue;
    const int64_t pid = std::atoll(ws->detail.c_str() + 4);
    if (pid > 0) out.emplace(pid, ws->worker);
  }
  return out;
}

// "worker 3": the coded decoder's index, or the elastic member's pid as the
// launcher named it; else the member's "host/pid" name.
std::string StragglerTarget(const records::Straggler& s, const WorkerOfPid& workers) {
  if (s.worker) return "worker " + std::to_string(*s.worker);
  if (auto it = s.pid ? workers.find(*s.pid) : workers.end(); it != workers.end()) return it->second;
  return s.member;
}

std::string StragglerText(const records::Straggler& s, const std::string& target) {
  std::string text = target.empty() ? "a worker" : target;
  text += s.slow ? " is slow" : " is no longer slow";
  std::vector<std::string> facts;
  if (s.ratio > 0) facts.push_back(FixedText(s.ratio, 1) + "x the median step time");
  if (s.share) {
    facts.push_back("share " + std::to_string(*s.share) +
                    (s.global_batch ? " of " + std::to_string(*s.global_batch) : std::string()));
  }
  if (s.step > 0) facts.push_back("step " + std::to_string(s.step));
  for (size_t i = 0; i < facts.size(); ++i) text += (i == 0 ? " (" : ", ") + facts[i];
  return facts.empty() ? text : text + ")";
}

std::string RecoveryText(const records::Recovery& r) {
  std::string text = "recovery" + (r.policy.empty() ? std::string() : " (" + r.policy + ")") + " " + r.phase;
  std::vector<std::string> facts;
  if (!r.dataset.empty()) facts.push_back("dataset " + r.dataset);
  if (r.phase == "done") {
    facts.push_back(std::to_string(r.lost_chunks) + " chunks lost");
    facts.push_back(std::to_string(r.chunks_rebuilt) + " rebuilt");
    facts.push_back(BytesText(static_cast<double>(r.bytes)));
    facts.push_back("in " + FixedText(r.seconds, 1) + " s");
  }
  if (!r.error.empty()) facts.push_back(r.error);
  for (size_t i = 0; i < facts.size(); ++i) text += (i == 0 ? ": " : ", ") + facts[i];
  return text;
}

std::string GenerationText(const records::Generation& g) {
  std::string members;
  for (int64_t m : g.members) members += (members.empty() ? "" : ", ") + std::to_string(m);
  std::string text = "generation " + std::to_string(g.number) + ": members " + (members.empty() ? "none" : members);
  if (!g.why.empty()) text += " (" + g.why + ")";
  if (g.reform_ms) text += ", re-formed in " + FixedText(*g.reform_ms, 0) + " ms";
  return text;
}

void ReadEvents(const std::vector<Record>& records, RunRecord& rec) {
  struct State {
    double t;
    std::string worker, state, host, detail;
  };
  std::vector<State> states;
  const WorkerOfPid workers = WorkersByPid(records);
  for (const Record& r : records) {
    if (auto f = records::FaultFrom(r.j)) {
      const std::string target = records::TargetName(*f);
      rec.events.push_back(f->fired ? RunEvent{r.t, EventKind::kFault, FaultText(*f), target}
                                    : RunEvent{r.t, EventKind::kNotice, "fault not fired: " + FaultText(*f), target});
    } else if (auto st = records::StragglerFrom(r.j)) {
      const std::string target = StragglerTarget(*st, workers);
      rec.events.push_back({r.t, EventKind::kStraggler, StragglerText(*st, target), target});
    } else if (auto recovery = records::RecoveryFrom(r.j)) {
      rec.events.push_back({r.t, EventKind::kRecovery, RecoveryText(*recovery), ""});
    } else if (auto notice = records::NoticeFrom(r.j)) {
      rec.events.push_back({r.t, EventKind::kNotice, notice->text, ""});
    } else if (auto g = records::GenerationFrom(r.j)) {
      rec.events.push_back({r.t, EventKind::kGeneration, GenerationText(*g), ""});
    } else if (auto ws = records::WorkerStateFrom(r.j)) {
      states.push_back({r.t, ws->worker, ws->state, ws->host, ws->detail});
    }
  }
  std::stable_sort(rec.events.begin(), rec.events.end(), [](const RunEvent& a, const RunEvent& b) { return a.t < b.t; });
  std::stable_sort(states.begin(), states.end(), [](const State& a, const State& b) { return a.t < b.t; });

  // A segment per transition, until the worker's next transition or the run's end.
  for (const State& s : states) {
    auto row = std::find_if(rec.workers.begin(), rec.workers.end(),
                            [&](const WorkerTimeline& w) { return w.name == s.worker; });
    if (row == rec.workers.end()) {
      rec.workers.push_back({s.worker, {}});
      row = rec.workers.end() - 1;
    }
    if (!row->segments.empty()) row->segments.back().end = s.t;
    row->segments.push_back({s.t, rec.end_seconds, s.state.empty() ? "unknown" : s.state, s.host, s.detail});
  }
}

// Fault times go on the charts' axis (seconds since the run started): a
// fault's "time" (unix seconds) minus the start; its "at_seconds" counts
// from when the launcher started the workers, later than the run's start
// (the reference run, the store, the coordinator come first), so it is
// used only when the summary has no "time" (older runs).
void ReadFaults(const json& summary, const std::vector<Record>& records, double start, RunRecord& rec) {
  if (summary.is_object() && summary.contains("faults") && summary["faults"].is_array()) {
    for (const json& f : summary["faults"]) {
      if (!f.is_object()) continue;
      FaultReaction fr;
      fr.action = Text(f, "action");
      fr.target = TargetOf(f);
      fr.fault = Text(f, "fault");
      if (fr.fault.empty()) fr.fault = (fr.action.empty() ? std::string("fault") : fr.action) + (fr.target.empty() ? "" : " " + fr.target);
      if (auto t = Number(f, "time"); t && std::isfinite(start)) {
        fr.at_seconds = std::max(0.0, *t - start);
      } else {
        fr.at_seconds = Number(f, "at_seconds");
        if (!fr.at_seconds) fr.at_seconds = Number(f, "elapsed_seconds");
      }
      fr.reaction = Text(f, "reaction");
      fr.recovered_seconds = Number(f, "recovered_seconds");
      fr.recovered = Flag(f, "recovered");
      fr.planned = Text(f, "source") != "unplanned";
      rec.faults.push_back(std::move(fr));
    }
    return;
  }
  // No summary (or an older one): the launcher's fault records, without reactions.
  for (const Record& r : records) {
    auto f = records::FaultFrom(r.j);
    if (!f || !f->fired) continue;
    FaultReaction fr;
    fr.action = f->action;
    fr.target = records::TargetName(*f);
    fr.fault = FaultText(*f);
    fr.at_seconds = r.t;
    rec.faults.push_back(std::move(fr));
  }
}

void ReadBytes(const json& summary, RunRecord& rec) {
  if (!summary.is_object() || !summary.contains("bytes_moved") || !summary["bytes_moved"].is_object()) return;
  const json& b = summary["bytes_moved"];
  for (const char* purpose : {"gradients", "models", "recovery", "shuffling"}) {
    if (auto v = Number(b, purpose)) rec.bytes_moved.emplace_back(purpose, std::max(0.0, *v));
  }
  for (const auto& [key, value] : b.items()) {
    if (key == "gradients" || key == "models" || key == "recovery" || key == "shuffling") continue;
    if (auto v = Number(b, key.c_str())) rec.bytes_moved.emplace_back(key, std::max(0.0, *v));
  }
}

void ReadCost(const json& summary, RunRecord& rec) {
  if (!summary.is_object() || !summary.contains("cost") || !summary["cost"].is_object()) return;
  const json& c = summary["cost"];
  CostRecord cost;
  cost.total = Number(c, "total").value_or(0);
  cost.currency = Text(c, "currency");
  if (c.contains("by_role") && c["by_role"].is_object()) {
    for (const auto& [role, value] : c["by_role"].items()) {
      if (auto v = Number(c["by_role"], role.c_str())) cost.by_role.emplace_back(role, *v);
    }
  }
  if (c.contains("process_seconds") && c["process_seconds"].is_object()) {
    for (const auto& [role, value] : c["process_seconds"].items()) {
      if (auto v = Number(c["process_seconds"], role.c_str())) cost.process_seconds[role] = *v;
    }
  }
  rec.cost = std::move(cost);
}

void ReadSummary(const json& s, RunRecord& rec) {
  rec.job_id = Text(s, "job_id");
  rec.mode = Text(s, "mode");
  rec.model = Text(s, "model");
  rec.final_test_accuracy = Number(s, "final_test_accuracy");
  rec.reference_test_accuracy = Number(s, "reference_test_accuracy");
  rec.wall_seconds = Number(s, "launcher_wall_seconds");
  if (!rec.wall_seconds) rec.wall_seconds = Number(s, "wall_seconds");
  rec.steps = Integer(s, "steps");
  rec.epochs = Integer(s, "epochs");
  if (s.contains("placement")) FlattenInto(s["placement"], "", rec.placement);
  ReadBytes(s, rec);
  ReadCost(s, rec);
}

// summary.json as an object; absent, broken or not an object is null (with
// a warning for the last two).
json ParseSummary(const std::optional<std::string>& text, const std::string& name, Warnings& warnings) {
  if (!text) return nullptr;
  json s = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (s.is_discarded() || !s.is_object()) {
    warnings.Add(name + " is not a JSON object (the run was stopped while writing it?); ignored");
    return nullptr;
  }
  return s;
}

}  // namespace

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kFault:
      return "fault";
    case EventKind::kStraggler:
      return "straggler";
    case EventKind::kRecovery:
      return "recovery";
    case EventKind::kNotice:
      return "notice";
    case EventKind::kGeneration:
      return "generation";
  }
  return "event";
}

Result<RunRecord> ParseRunRecord(const RunFiles& files) {
  if (!files.metrics) {
    return InvalidArgument(files.dir + " has no metrics.jsonl: is it a tenax run directory?");
  }
  RunRecord rec;
  rec.dir = files.dir;
  Warnings warnings(&rec.warnings);

  const json summary = ParseSummary(files.summary, "summary.json", warnings);
  rec.finished = summary.is_object();
  std::vector<Record> records = ParseLines(*files.metrics, "metrics.jsonl", warnings);
  const double start = Place(records, Number(summary, "started_at"));
  rec.records = records.size();
  rec.run = CurvesOf(records);
  if (rec.finished) ReadSummary(summary, rec);

  rec.end_seconds = rec.run.end_seconds;
  if (rec.wall_seconds && summary.contains("started_at")) rec.end_seconds = std::max(rec.end_seconds, *rec.wall_seconds);
  ReadEvents(records, rec);
  ReadFaults(summary, records, start, rec);
  if (!rec.final_test_accuracy && !rec.run.test_accuracy.empty()) {
    rec.final_test_accuracy = rec.run.test_accuracy.back().value;
  }

  if (files.reference_metrics) {
    rec.has_reference = true;
    const json ref_summary = ParseSummary(files.reference_summary, "reference/summary.json", warnings);
    std::vector<Record> ref = ParseLines(*files.reference_metrics, "reference/metrics.jsonl", warnings);
    (void)Place(ref, Number(ref_summary, "started_at"));
    rec.reference = CurvesOf(ref);
    if (!rec.reference_test_accuracy) rec.reference_test_accuracy = Number(ref_summary, "final_test_accuracy");
    if (!rec.reference_test_accuracy && !rec.reference.test_accuracy.empty()) {
      rec.reference_test_accuracy = rec.reference.test_accuracy.back().value;
    }
  }
  return rec;
}

namespace {

// A file's contents, nullopt when it does not exist; other failures are errors.
Result<std::optional<std::string>> ReadIfPresent(const std::string& path) {
  auto text = ReadFileText(path, kMaxFileBytes);
  if (text.ok()) return std::optional<std::string>(std::move(text).value());
  if (text.status().code() == StatusCode::kNotFound) return std::optional<std::string>();
  return text.status();
}

}  // namespace

Result<RunRecord> LoadRunRecord(const std::string& dir) {
  struct stat st {};
  if (dir.empty()) return InvalidArgument("no run directory given: name the --out DIR of a `tenax run`");
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound(dir + ": no such directory: name the --out DIR of a `tenax run`");
    return IoError(dir + ": " + ErrnoMessage(errno));
  }
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(dir + " is not a directory: name the --out DIR of a `tenax run`");

  RunFiles files;
  files.dir = dir;
  const RunDir run(dir);
  TENAX_ASSIGN_OR_RETURN(files.metrics, ReadIfPresent(run.metrics()));
  if (!files.metrics) return ParseRunRecord(files);  // the "not a run directory" message
  TENAX_ASSIGN_OR_RETURN(files.summary, ReadIfPresent(run.summary()));

  // The reference run: where the summary says, else DIR/reference.
  std::string ref_dir = run.reference();
  if (files.summary) {
    json s = json::parse(*files.summary, nullptr, false);
    if (std::string named = Text(s, "reference_dir"); !named.empty()) {
      ref_dir = named.front() == '/' ? named : dir + "/" + named;
    }
  }
  TENAX_ASSIGN_OR_RETURN(files.reference_metrics, ReadIfPresent(RunDir(ref_dir).metrics()));
  TENAX_ASSIGN_OR_RETURN(files.reference_summary, ReadIfPresent(RunDir(ref_dir).summary()));
  return ParseRunRecord(files);
}

}  // namespace tenax::report
