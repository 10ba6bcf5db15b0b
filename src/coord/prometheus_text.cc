#include "prometheus_text.h"

#include <charconv>
#include <cmath>

namespace tenax::coord {

namespace {

// The format's escapes: backslash and newline everywhere, and the double
// quote in label values too (help text is not quoted).
std::string Escape(std::string_view text, bool escape_quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"' && escape_quote) {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) { return Escape(value, /*escape_quote=*/true); }

std::string EscapeHelp(std::string_view help) { return Escape(help, /*escape_quote=*/false); }

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Counters and steps are integers: "1000000", not "1e+06".
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, value);  // shortest form that reads back exactly
  return std::string(buf, r.ptr);
}

PrometheusText::Family& PrometheusText::Find(const std::string& name) {
  for (Family& f : families_) {
    if (f.name == name) return f;
  }
  families_.push_back(Family{name, "untyped", "", ""});
  return families_.back();
}

void PrometheusText::Declare(const std::string& name, MetricType type, const std::string& help) {
  for (const Family& f : families_) {
    if (f.name == name) return;
  }
  families_.push_back(Family{name, type == MetricType::kCounter ? "counter" : "gauge", help, ""});
}

void PrometheusText::Add(const std::string& name, const MetricLabels& labels, double value) {
  Family& f = Find(name);
  f.samples += name;
  if (!labels.empty()) {
    f.samples += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) f.samples += ',';
      f.samples += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + '"';
    }
    f.samples += '}';
  }
  f.samples += ' ' + FormatMetricValue(value) + '\n';
}

std::string PrometheusText::Render() const {
  std::string out;
  for (const Family& f : families_) {
    if (!f.help.empty()) out += "# HELP " + f.name + ' ' + EscapeHelp(f.help) + '\n';
    out += "# TYPE " + f.name + ' ' + f.type + '\n';
    out += f.samples;
  }
  return out;
}

std::string RenderJobMetrics(const JobMetrics& m) {
  PrometheusText t;
  const MetricLabels job{{"job", m.job_id}};
  auto gauge = [&](const std::string& name, const std::string& help, std::optional<double> value) {
    t.Declare(name, MetricType::kGauge, help);
    if (value) t.Add(name, job, *value);
  };
  auto counter = [&](const std::string& name, const std::string& help, double value) {
    t.Declare(name, MetricType::kCounter, help);
    t.Add(name, job, value);
  };
  auto d = [](auto v) { return static_cast<double>(v); };

  gauge("tenax_job_step", "The furthest training step any worker of the job reported.", d(m.step));
  gauge("tenax_job_total_steps", "Training steps the job runs in all (0 until known).", d(m.total_steps));
  gauge("tenax_job_epoch", "Epoch (1-based) of the furthest worker; 0 before any report.", d(m.epoch));
  gauge("tenax_job_epochs", "Epochs the job runs.", d(m.epochs));
  gauge("tenax_samples_per_second", "Training samples per second of the whole job (evaluation excluded).",
        m.samples_per_second);
  gauge("tenax_train_loss", "The latest training loss a worker reported (the mean over replicas at log points).",
        m.train_loss);
  gauge("tenax_test_accuracy", "Test accuracy (0..1) at the latest evaluation.", m.test_accuracy);
  gauge("tenax_workers", "Workers that are members of the job now (training or done).", d(m.workers));
  gauge("tenax_generation", "Membership generation: bumps whenever the set of members changes.", d(m.generation));

  const struct {
    const char* name;
    const char* help;
    double (*value)(const WorkerMetrics&);
  } per_worker[] = {
      {"tenax_worker_step", "Global step of a worker after its latest report.",
       [](const WorkerMetrics& w) { return static_cast<double>(w.step); }},
      {"tenax_worker_step_seconds",
       "A worker's mean seconds per step (data, compute and exchange) over its latest report interval.",
       [](const WorkerMetrics& w) { return w.step_seconds; }},
      {"tenax_worker_last_report_age_seconds", "Seconds since the coordinator last heard a worker's progress.",
       [](const WorkerMetrics& w) { return w.last_report_age_seconds; }},
  };
  for (const auto& family : per_worker) {
    t.Declare(family.name, MetricType::kGauge, family.help);
    for (const WorkerMetrics& w : m.worker_reports) {
      t.Add(family.name, {{"job", m.job_id}, {"rank", std::to_string(w.rank)}}, family.value(w));
    }
  }

  counter("tenax_leases_issued_total", "Work-unit leases granted, re-issues included (asynchronous jobs).",
          d(m.leases_issued));
  counter("tenax_leases_expired_total", "Work-unit leases that expired or whose worker was lost (asynchronous jobs).",
          d(m.leases_expired));
  counter("tenax_units_reissued_total", "Leases granted for a work unit's second or later attempt (asynchronous jobs).",
          d(m.units_reissued));
  counter("tenax_recovery_bytes_total", "Bytes moved by store recoveries the job's workers started.",
          d(m.recovery_bytes));
  gauge("tenax_job_done", "1 once every worker finished, else 0.", m.done ? 1.0 : 0.0);
  gauge("tenax_job_failed", "1 once the job failed, else 0.", m.failed ? 1.0 : 0.0);
  return t.Render();
}

}  // namespace tenax::coord
