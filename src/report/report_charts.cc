#include "report_charts.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "format.h"
#include "svg_chart.h"

namespace tenax::report {
namespace {

constexpr const char* kRunColor = "#2563eb";
constexpr const char* kReferenceColor = "#9ca3af";

// Worker states in the order a worker lives through them (the legend's order).
struct StateStyle {
  const char* state;
  const char* color;
};
constexpr StateStyle kStates[] = {
    {"starting", "#93c5fd"}, {"active", "#22c55e"},    {"slow", "#f59e0b"},  {"preempted", "#a855f7"},
    {"killed", "#ef4444"},   {"failed", "#b91c1c"},    {"stopped", "#78716c"},   {"rejoining", "#06b6d4"},
    {"spare", "#67e8f9"},    {"left", "#d1d5db"},      {"done", "#64748b"},
};
constexpr const char* kOtherState = "#fde047";

MarkerShape ShapeOf(EventKind kind) {
  switch (kind) {
    case EventKind::kFault:
      return MarkerShape::kTriangle;
    case EventKind::kStraggler:
      return MarkerShape::kDiamond;
    case EventKind::kRecovery:
      return MarkerShape::kCircle;
    case EventKind::kNotice:
    case EventKind::kGeneration:
      return MarkerShape::kSquare;
  }
  return MarkerShape::kSquare;
}

// The drawing order of markers: context first, faults last.
int Priority(MarkerShape shape, double size) {
  if (size < 13) return 0;  // notices and generations
  switch (shape) {
    case MarkerShape::kCircle:  // recovery
      return 1;
    case MarkerShape::kDiamond:  // straggler
      return 2;
    case MarkerShape::kTriangle:  // fault
      return 3;
    case MarkerShape::kSquare:
      return 0;
  }
  return 0;
}

double AxisEnd(const RunRecord& rec) {
  return std::max(rec.end_seconds, rec.has_reference ? rec.reference.end_seconds : 0.0);
}

std::vector<TimeMarker> FaultMarkers(const RunRecord& rec) {
  std::vector<TimeMarker> out;
  const bool short_run = AxisEnd(rec) < 120;
  for (const RunEvent& e : rec.events) {
    if (e.kind == EventKind::kFault) out.push_back({e.t, EventColor(e.kind), ClockText(e.t, short_run) + " " + e.text});
  }
  return out;
}

LineChart CurvesChart(const RunRecord& rec, bool accuracy) {
  LineChart c;
  c.x_max = AxisEnd(rec);
  c.series.push_back({"this run", kRunColor, false, accuracy ? rec.run.test_accuracy : rec.run.train_loss});
  if (rec.has_reference) {
    c.series.push_back({"fault-free reference", kReferenceColor, true,
                        accuracy ? rec.reference.test_accuracy : rec.reference.train_loss});
  }
  c.markers = FaultMarkers(rec);
  c.markers_legend = "faults";
  return c;
}

}  // namespace

const char* StateColor(const std::string& state) {
  for (const StateStyle& s : kStates) {
    if (state == s.state) return s.color;
  }
  return kOtherState;
}

const char* EventColor(EventKind kind) {
  switch (kind) {
    case EventKind::kFault:
      return "#dc2626";
    case EventKind::kStraggler:
      return "#ea580c";
    case EventKind::kRecovery:
      return "#1d4ed8";
    case EventKind::kNotice:
      return "#4b5563";
    case EventKind::kGeneration:
      return "#0f766e";
  }
  return "#4b5563";
}

std::string AccuracyChartSvg(const RunRecord& rec) {
  LineChart c = CurvesChart(rec, true);
  c.name = "accuracy";
  c.title = "Test accuracy vs time";
  c.y_label = "test accuracy";
  c.y_floor = 0;
  c.y_ceiling = 1;
  c.y_format = [](double v) { return PercentText(v, std::fabs(v * 100 - std::round(v * 100)) < 1e-6 ? 0 : 1); };
  c.empty_text = "no data: no epoch was evaluated";
  return RenderLineChart(c);
}

std::string LossChartSvg(const RunRecord& rec) {
  LineChart c = CurvesChart(rec, false);
  c.name = "loss";
  c.title = "Training loss vs time";
  c.y_label = "training loss";
  c.y_floor = 0;
  c.y_format = [](double v) { return FixedText(v, std::fabs(v) < 0.1 ? 3 : 2); };
  c.empty_text = "no data: no training interval was logged";
  return RenderLineChart(c);
}

std::string WorkersTimelineSvg(const RunRecord& rec) {
  Timeline tl;
  tl.name = "workers";
  tl.title = "Workers: states over time, with faults, stragglers, recoveries and notices";
  tl.end = AxisEnd(rec);
  const bool short_run = tl.end < 120;
  tl.rows.push_back({"job", {}, {}});
  std::set<std::string> states_seen;
  for (const WorkerTimeline& w : rec.workers) {
    TimelineRow row{w.name, {}, {}};
    for (const StateSegment& s : w.segments) {
      std::string tip = w.name + ": " + s.state + " from " + ClockText(s.start, short_run) + " to " +
                        ClockText(s.end, short_run) + " (" + DurationText(s.end - s.start) + ")";
      if (!s.host.empty()) tip += " on " + s.host;
      if (!s.detail.empty()) tip += "; " + s.detail;
      row.segments.push_back({s.start, s.end, StateColor(s.state), tip});
      states_seen.insert(s.state);
    }
    tl.rows.push_back(std::move(row));
  }
  std::set<EventKind> kinds_seen;
  for (const RunEvent& e : rec.events) {
    auto row = std::find_if(tl.rows.begin() + 1, tl.rows.end(), [&](const TimelineRow& r) { return r.label == e.target; });
    if (row == tl.rows.end()) row = tl.rows.begin();  // job-wide, or a server or storage node
    // Notices and generations are context: smaller than faults and the like.
    const bool minor = e.kind == EventKind::kNotice || e.kind == EventKind::kGeneration;
    row->markers.push_back({e.t, ShapeOf(e.kind), EventColor(e.kind),
                            ClockText(e.t, short_run) + " " + EventKindName(e.kind) + ": " + e.text,
                            minor ? 9.0 : 13.0});
    kinds_seen.insert(e.kind);
  }
  // Where markers overlap (a fault and its notice a moment later), the
  // fault is drawn last, on top.
  for (TimelineRow& row : tl.rows) {
    std::stable_sort(row.markers.begin(), row.markers.end(), [](const TimelineMarker& a, const TimelineMarker& b) {
      return Priority(a.shape, a.size) < Priority(b.shape, b.size);
    });
  }
  if (tl.rows.front().markers.empty()) tl.rows.erase(tl.rows.begin());

  for (const StateStyle& s : kStates) {
    if (states_seen.count(s.state)) tl.legend.push_back({s.state, s.color, std::nullopt});
  }
  for (const std::string& s : states_seen) {
    if (StateColor(s) == kOtherState) tl.legend.push_back({s, kOtherState, std::nullopt});
  }
  for (EventKind k : {EventKind::kFault, EventKind::kStraggler, EventKind::kRecovery, EventKind::kNotice,
                      EventKind::kGeneration}) {
    if (kinds_seen.count(k)) tl.legend.push_back({EventKindName(k), EventColor(k), ShapeOf(k)});
  }
  tl.empty_text = "no data: the run recorded no worker states or events";
  return RenderTimeline(tl);
}

std::string BytesChartSvg(const RunRecord& rec) {
  BarChart c;
  c.name = "bytes";
  c.title = "Bytes moved by purpose";
  for (const auto& [purpose, bytes] : rec.bytes_moved) {
    const char* color = purpose == "gradients"   ? "#2563eb"
                        : purpose == "models"    ? "#7c3aed"
                        : purpose == "recovery"  ? "#dc2626"
                        : purpose == "shuffling" ? "#f59e0b"
                                                 : "#6b7280";
    c.bars.push_back({purpose, bytes, BytesText(bytes), color});
  }
  c.empty_text = rec.finished ? "no data: the summary lists no bytes moved" : "no data: the run did not finish";
  return RenderBarChart(c);
}

std::string CostChartSvg(const RunRecord& rec) {
  BarChart c;
  c.name = "cost";
  c.title = "Cost by role";
  if (rec.cost) {
    for (const auto& [role, amount] : rec.cost->by_role) {
      std::string text = MoneyText(amount, rec.cost->currency);
      if (auto it = rec.cost->process_seconds.find(role); it != rec.cost->process_seconds.end()) {
        text += " (" + FixedText(it->second / 3600, 2) + " process-hours)";
      }
      c.bars.push_back({role, amount, text, "#0d9488"});
    }
  }
  c.empty_text = "no data: no price table was given";
  return RenderBarChart(c);
}

}  // namespace tenax::report
