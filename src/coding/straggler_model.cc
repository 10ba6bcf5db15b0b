#include "tenax/coding/straggler_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <sstream>
#include <system_error>
#include <utility>

#include "tenax/core/number_text.h"
#include "tenax/core/seeds.h"

namespace tenax::coding {
namespace {

constexpr double kMaxSlowdown = 1000;
constexpr size_t kMaxTraceEntries = 1000000;
constexpr size_t kMaxTraceLine = 1024;

// Streams: independent uniforms for the same (worker, step).
enum Stream : uint64_t { kIidSlow = 1, kIidFactor = 2, kMarkovTransition = 3, kMarkovFactor = 4 };

constexpr uint64_t SplitMix(uint64_t x) { return SplitMix64(x); }

// A uniform in [0, 1) that depends only on (seed, stream, worker, step).
// Each input goes through a full splitmix round, so nearby seeds, workers
// and steps give unrelated values.
double Uniform(uint64_t seed, Stream stream, int worker, int64_t step) {
  uint64_t h = SplitMix(seed);
  h = SplitMix(h ^ stream);
  h = SplitMix(h ^ static_cast<uint64_t>(worker));
  h = SplitMix(h ^ static_cast<uint64_t>(step));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// min + (max-min) u, clamped: rounding must not step outside the range.
double Draw(const SlowdownRange& r, double u) { return std::min(r.max, r.min + (r.max - r.min) * u); }

std::string RangeText(const SlowdownRange& r) {
  std::ostringstream s;
  s << r.min << "x";
  if (r.max != r.min) s << "-" << r.max << "x";
  return s.str();
}

std::string Num(double v) { return NumberText(v); }

std::string WorkersText(int workers) { return "workers 0.." + std::to_string(workers - 1); }

Status CheckWorkers(int workers) {
  if (workers < 1) {
    return InvalidArgument("a straggler model needs at least 1 worker, got " + std::to_string(workers));
  }
  return Status::Ok();
}

Status CheckRange(const SlowdownRange& r, const char* what) {
  if (!std::isfinite(r.min) || !std::isfinite(r.max) || r.min < 1 || r.max < r.min || r.max > kMaxSlowdown) {
    return InvalidArgument(std::string(what) + " slowdown range " + Num(r.min) + ".." + Num(r.max) +
                           " is not valid: use 1 <= min <= max <= 1000 (1 is full speed)");
  }
  return Status::Ok();
}

Status CheckProbability(double p, const char* what) {
  if (!(p >= 0 && p <= 1)) return InvalidArgument(std::string(what) + " " + Num(p) + " is not a probability in [0, 1]");
  return Status::Ok();
}

class NoStragglers final : public StragglerModel {
 public:
  double Slowdown(int, int64_t) override { return 1; }
  bool Slow(int, int64_t) override { return false; }
  std::string Describe() const override { return "none"; }
};

class IidStragglers final : public StragglerModel {
 public:
  IidStragglers(int workers, IidStragglerParams p, uint64_t seed) : workers_(workers), p_(p), seed_(seed) {}

  bool Slow(int worker, int64_t step) override {
    return worker >= 0 && worker < workers_ && step >= 0 && Uniform(seed_, kIidSlow, worker, step) < p_.probability;
  }
  double Slowdown(int worker, int64_t step) override {
    return Slow(worker, step) ? Draw(p_.slow, Uniform(seed_, kIidFactor, worker, step)) : 1.0;
  }
  std::string Describe() const override {
    return "iid (probability " + Num(p_.probability) + ", slow " + RangeText(p_.slow) + ")";
  }

 private:
  int workers_;
  IidStragglerParams p_;
  uint64_t seed_;
};

class MarkovStragglers final : public StragglerModel {
 public:
  MarkovStragglers(int workers, MarkovStragglerParams p, uint64_t seed)
      : workers_(workers), p_(std::move(p)), seed_(seed), states_(static_cast<size_t>(workers), std::vector<bool>(1)) {
    for (int w : p_.start_slow) states_[static_cast<size_t>(w)][0] = true;
  }

  bool Slow(int worker, int64_t step) override {
    if (worker < 0 || worker >= workers_ || step < 0) return false;
    std::vector<bool>& s = states_[static_cast<size_t>(worker)];
    // Extend the chain from the last cached step; the transition into step
    // t uses the uniform of (worker, t) alone, so the same states come out
    // in every process whatever it asked before.
    while (static_cast<int64_t>(s.size()) <= step) {
      const int64_t t = static_cast<int64_t>(s.size());
      const double u = Uniform(seed_, kMarkovTransition, worker, t);
      const bool was_slow = s.back();
      s.push_back(was_slow ? u >= p_.p_recover : u < p_.p_slow);
    }
    return s[static_cast<size_t>(step)];
  }
  double Slowdown(int worker, int64_t step) override {
    if (worker < 0 || worker >= workers_ || step < 0) return 1;
    const double u = Uniform(seed_, kMarkovFactor, worker, step);
    return Slow(worker, step) ? Draw(p_.slow, u) : Draw(p_.active, u);
  }
  std::string Describe() const override {
    std::string d = "markov (p_slow " + Num(p_.p_slow) + ", p_recover " + Num(p_.p_recover) + ", slow " +
                    RangeText(p_.slow) + ", active " + RangeText(p_.active) + ", start slow:";
    if (p_.start_slow.empty()) d += " none";
    for (int w : p_.start_slow) d += " " + std::to_string(w);
    return d + ")";
  }

 private:
  int workers_;
  MarkovStragglerParams p_;
  uint64_t seed_;
  std::vector<std::vector<bool>> states_;  // per worker: slow at step 0, 1, ... (grown on demand)
};

class TraceStragglers final : public StragglerModel {
 public:
  TraceStragglers(int workers, std::vector<TraceEntry> entries)
      : per_worker_(static_cast<size_t>(workers)), entries_(entries.size()) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](const TraceEntry& a, const TraceEntry& b) { return a.step < b.step; });
    for (const TraceEntry& e : entries) per_worker_[static_cast<size_t>(e.worker)].push_back(e);
  }

  double Slowdown(int worker, int64_t step) override {
    if (worker < 0 || static_cast<size_t>(worker) >= per_worker_.size() || step < 0) return 1;
    const std::vector<TraceEntry>& v = per_worker_[static_cast<size_t>(worker)];
    // The last entry at or before `step` (the later of equal steps).
    auto it = std::upper_bound(v.begin(), v.end(), step, [](int64_t s, const TraceEntry& e) { return s < e.step; });
    return it == v.begin() ? 1.0 : std::prev(it)->slowdown;
  }
  bool Slow(int worker, int64_t step) override { return Slowdown(worker, step) > 1; }
  std::string Describe() const override {
    return "trace (" + std::to_string(entries_) + " entries, " + WorkersText(static_cast<int>(per_worker_.size())) +
           ")";
  }

 private:
  std::vector<std::vector<TraceEntry>> per_worker_;  // each sorted by step
  size_t entries_;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// A field quoted in an error message, cut short: a line may hold 1 KiB of
// anything.
std::string Quote(std::string_view f) {
  constexpr size_t kMax = 32;
  std::string q = "'" + std::string(f.substr(0, kMax));
  if (f.size() > kMax) q += "...";
  return q + "'";
}

// The whole field as a decimal integer ("-3" parses, "3x", "+3", "" do not).
bool ParseInt(std::string_view f, int64_t& v) {
  const char* end = f.data() + f.size();
  auto [p, ec] = std::from_chars(f.data(), end, v);
  return !f.empty() && ec == std::errc() && p == end;
}

// The whole field as a decimal number, locale-independent ("inf" and "nan"
// parse and are rejected by the range check).
bool ParseReal(std::string_view f, double& v) {
  const char* end = f.data() + f.size();
  auto [p, ec] = std::from_chars(f.data(), end, v, std::chars_format::general);
  return !f.empty() && ec == std::errc() && p == end;
}

}  // namespace

std::unique_ptr<StragglerModel> MakeNoStragglers() { return std::make_unique<NoStragglers>(); }

Result<std::unique_ptr<StragglerModel>> MakeIidStragglers(int workers, const IidStragglerParams& params,
                                                          uint64_t seed) {
  TENAX_RETURN_IF_ERROR(CheckWorkers(workers));
  TENAX_RETURN_IF_ERROR(CheckProbability(params.probability, "stragglers.probability"));
  TENAX_RETURN_IF_ERROR(CheckRange(params.slow, "the slow"));
  return std::unique_ptr<StragglerModel>(std::make_unique<IidStragglers>(workers, params, seed));
}

Result<std::unique_ptr<StragglerModel>> MakeMarkovStragglers(int workers, const MarkovStragglerParams& params,
                                                             uint64_t seed) {
  TENAX_RETURN_IF_ERROR(CheckWorkers(workers));
  TENAX_RETURN_IF_ERROR(CheckProbability(params.p_slow, "stragglers.p_slow"));
  TENAX_RETURN_IF_ERROR(CheckProbability(params.p_recover, "stragglers.p_recover"));
  TENAX_RETURN_IF_ERROR(CheckRange(params.slow, "the slow"));
  TENAX_RETURN_IF_ERROR(CheckRange(params.active, "the active"));
  for (int w : params.start_slow) {
    if (w < 0 || w >= workers) {
      return InvalidArgument("stragglers.slow_workers names worker " + std::to_string(w) + ", not in this job (" +
                             WorkersText(workers) + ")");
    }
  }
  return std::unique_ptr<StragglerModel>(std::make_unique<MarkovStragglers>(workers, params, seed));
}

Result<std::unique_ptr<StragglerModel>> MakeTraceStragglers(int workers, std::vector<TraceEntry> entries) {
  TENAX_RETURN_IF_ERROR(CheckWorkers(workers));
  for (const TraceEntry& e : entries) {
    const std::string entry = "trace entry (step " + std::to_string(e.step) + ", worker " + std::to_string(e.worker) +
                              ", slowdown " + Num(e.slowdown) + "): ";
    if (e.worker < 0 || e.worker >= workers) {
      return InvalidArgument(entry + "the worker is not in this job (" + WorkersText(workers) + ")");
    }
    if (e.step < 0) return InvalidArgument(entry + "steps count from 0");
    if (!(e.slowdown >= 1 && e.slowdown <= kMaxSlowdown)) {
      return InvalidArgument(entry + "use a slowdown in [1, 1000] (1 is full speed)");
    }
  }
  return std::unique_ptr<StragglerModel>(std::make_unique<TraceStragglers>(workers, std::move(entries)));
}

Result<std::vector<TraceEntry>> ParseStragglerTrace(std::string_view text, const std::string& source, int workers) {
  if (workers < 1) {
    return InvalidArgument(source + ": a straggler trace needs a job of at least 1 worker, got " +
                           std::to_string(workers));
  }
  std::vector<TraceEntry> out;
  int64_t line_no = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_no;
    const std::string where = source + ":" + std::to_string(line_no) + ": ";
    if (line.size() > kMaxTraceLine) {
      return InvalidArgument(where + "line of " + std::to_string(line.size()) +
                             " bytes is longer than 1 KiB (one \"step,worker,slowdown\" entry a line)");
    }
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = Trim(line);
    if (line.empty()) continue;

    std::vector<std::string_view> fields;
    while (true) {
      const size_t comma = line.find(',');
      fields.push_back(Trim(line.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      line = line.substr(comma + 1);
    }
    if (fields.size() != 3) {
      return InvalidArgument(where + "expected 3 comma-separated fields \"step,worker,slowdown\", got " +
                             std::to_string(fields.size()));
    }

    TraceEntry e;
    if (!ParseInt(fields[0], e.step)) {
      return InvalidArgument(where + "step " + Quote(fields[0]) + " is not a number (use a decimal integer >= 0)");
    }
    if (e.step < 0)
      return InvalidArgument(where + "step " + std::to_string(e.step) + " is negative (steps count from 0)");
    int64_t worker = 0;
    if (!ParseInt(fields[1], worker)) {
      return InvalidArgument(where + "worker " + Quote(fields[1]) + " is not a number (use a worker rank, " +
                             WorkersText(workers) + ")");
    }
    if (worker < 0 || worker >= workers) {
      return InvalidArgument(where + "worker " + std::to_string(worker) + " is not in this job (" +
                             WorkersText(workers) + ")");
    }
    e.worker = static_cast<int>(worker);
    if (!ParseReal(fields[2], e.slowdown)) {
      return InvalidArgument(where + "slowdown " + Quote(fields[2]) +
                             " is not a number (use a decimal in [1, 1000], 1 = full speed)");
    }
    if (!(e.slowdown >= 1 && e.slowdown <= kMaxSlowdown)) {
      return InvalidArgument(where + "slowdown " + Quote(fields[2]) +
                             " is not in [1, 1000] (1 = full speed, 5 = five times slower)");
    }
    if (out.size() >= kMaxTraceEntries) {
      return InvalidArgument(where + "more than 1,000,000 entries (record only the steps where a slowdown changes)");
    }
    out.push_back(e);
  }
  std::stable_sort(out.begin(), out.end(), [](const TraceEntry& a, const TraceEntry& b) { return a.step < b.step; });
  return out;
}

}  // namespace tenax::coding
