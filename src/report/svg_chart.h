// Charts as inline SVG strings for the self-contained HTML report: a line
// chart over time, a horizontal timeline of coloured segments with event
// markers, and a horizontal bar chart. No scripts, fonts or URLs: the page
// works offline and in a headless browser.
//
// Every chart is one <svg class="chart" data-chart="NAME" data-points="N">
// where N counts the data marks drawn (elements of class "mark": points,
// segments, markers, bars). A chart without data draws a visible "no data"
// text and has data-points="0", so a browser check can tell an empty chart
// from a broken one. Every text that comes from the run (names, tooltips)
// is XML-escaped here; callers pass plain text.
//
// Pure functions; colours are CSS colour strings chosen by the caller.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/report/run_record.h"

namespace tenax::report {

// &, <, >, " and ' as entities; control characters XML does not allow as '?'.
std::string EscapeXml(std::string_view text);

// "1:05" for 65 s (or "1:02:03" past an hour); "12.5 s" below a minute when
// `short_run` (the axis spans less than two minutes).
std::string ClockText(double seconds, bool short_run);

// Tick values covering [lo, hi] at a "nice" step (1, 2, 2.5 or 5 times a
// power of ten), about `target` of them; the first is <= lo, the last >= hi.
std::vector<double> NiceTicks(double lo, double hi, int target);

struct LineSeries {
  std::string name;
  std::string color;
  bool dashed = false;
  std::vector<TimePoint> points;
};

// A vertical line at a time (e.g. a fault), with a tooltip.
struct TimeMarker {
  double t = 0;
  std::string color;
  std::string tooltip;
};

struct LineChart {
  std::string name;  // data-chart, e.g. "accuracy"
  std::string title;
  std::string y_label;
  std::vector<LineSeries> series;
  std::vector<TimeMarker> markers;
  std::string markers_legend;  // legend text for the markers ("faults"); "" = none
  double x_max = 0;            // the time axis' end (0: the last point's time)
  std::optional<double> y_floor, y_ceiling;  // clamp the y axis (accuracy: 0..1)
  std::function<std::string(double)> y_format;
  std::string empty_text = "no data";
};
std::string RenderLineChart(const LineChart& chart);

enum class MarkerShape { kTriangle, kDiamond, kCircle, kSquare };

struct TimelineSegment {
  double start = 0;
  double end = 0;
  std::string color;
  std::string tooltip;
};
// Markers are drawn in the order given: later ones on top of earlier ones.
struct TimelineMarker {
  double t = 0;
  MarkerShape shape = MarkerShape::kCircle;
  std::string color;
  std::string tooltip;
  double size = 13;  // px across
};
struct TimelineRow {
  std::string label;
  std::vector<TimelineSegment> segments;
  std::vector<TimelineMarker> markers;
};
// A legend entry: a colour swatch, or a marker shape when `shape` is set.
struct LegendEntry {
  std::string label;
  std::string color;
  std::optional<MarkerShape> shape;
};
struct Timeline {
  std::string name;
  std::string title;
  double end = 0;  // the time axis' end
  std::vector<TimelineRow> rows;
  std::vector<LegendEntry> legend;
  std::string empty_text = "no data";
};
std::string RenderTimeline(const Timeline& timeline);

struct Bar {
  std::string label;
  double value = 0;        // a bar of value <= 0 draws no mark, only its label
  std::string value_text;  // shown right of the bar
  std::string color;
};
struct BarChart {
  std::string name;
  std::string title;
  std::vector<Bar> bars;
  std::string empty_text = "no data";
};
std::string RenderBarChart(const BarChart& chart);

}  // namespace tenax::report
