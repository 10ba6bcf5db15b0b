// The coordinator's metrics in Prometheus's text exposition format 0.0.4
// (what GET /metrics serves; docs/metrics.md lists every metric):
//
//   * PrometheusText writes metric families: each family's `# HELP` and
//     `# TYPE` lines exactly once, then all of its samples together (the
//     format requires a family's samples to be contiguous), with label
//     values and help texts escaped as the format says;
//   * RenderJobMetrics turns a plain JobMetrics snapshot into that text.
//
// Pure: no clock, no I/O, no locks; the caller hands in a snapshot (the
// coordinator's loop builds it, the metrics endpoint renders it).
// Threading: a PrometheusText is used by one thread; the functions are
// reentrant. Failures: none (metric and label names are the program's own
// constants; values are any double, NaN and infinities included).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tenax::coord {

// What a /metrics response carries as its Content-Type.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kGauge, kCounter };

// A sample's labels, in the order written: {name, value}.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class PrometheusText {
 public:
  // Declares family `name` (the full metric name, "_total" included for
  // counters). Declaring a name again keeps the first help and type.
  void Declare(const std::string& name, MetricType type, const std::string& help);
  // Adds a sample to family `name`. A family never declared is written
  // with `# TYPE name untyped` and no help.
  void Add(const std::string& name, const MetricLabels& labels, double value);
  // Families in the order declared; a declared family without samples
  // keeps its HELP and TYPE lines (valid, and says the metric exists).
  std::string Render() const;

 private:
  struct Family {
    std::string name, type, help;
    std::string samples;  // rendered lines
  };
  Family& Find(const std::string& name);
  std::vector<Family> families_;
};

// `\` -> `\\`, `"` -> `\"`, newline -> `\n` (label values).
std::string EscapeLabelValue(std::string_view value);
// `\` -> `\\`, newline -> `\n` (HELP text).
std::string EscapeHelp(std::string_view help);
// Integral values below 2^53 as integers ("1000000"), others in the
// shortest form that reads back exactly ("0.25", "1e-07"); "NaN", "+Inf",
// "-Inf".
std::string FormatMetricValue(double value);

// One worker's latest report, as the coordinator last heard it.
struct WorkerMetrics {
  int rank = 0;                          // the member id (JoinReply rank): stable across generations
  int64_t step = 0;                      // global step after its latest report
  double step_seconds = 0;               // mean seconds per step over its latest report interval
  double last_report_age_seconds = 0;    // since the coordinator received that report
};

// The job as the coordinator sees it at one moment.
struct JobMetrics {
  std::string job_id;
  int64_t step = 0;          // the furthest step any worker reported
  int64_t total_steps = 0;   // 0 until known
  int64_t epoch = 0;         // 1-based, of the furthest worker; 0 before any report
  int64_t epochs = 0;
  double samples_per_second = 0;
  std::optional<double> train_loss;     // unset before any report
  std::optional<double> test_accuracy;  // the latest evaluation; unset before the first
  int64_t workers = 0;                  // current members (training or done)
  uint64_t generation = 0;
  // Asynchronous jobs' work queue (0 for other jobs).
  int64_t leases_issued = 0;
  int64_t leases_expired = 0;
  int64_t units_reissued = 0;
  int64_t recovery_bytes = 0;  // summed over every worker that ever reported
  bool done = false;
  bool failed = false;
  std::vector<WorkerMetrics> worker_reports;  // current members that reported, by rank
};

// Every tenax_* family, each with the job="ID" label (and rank="N" for the
// per-worker ones), in the order docs/metrics.md lists them.
std::string RenderJobMetrics(const JobMetrics& m);

}  // namespace tenax::coord
