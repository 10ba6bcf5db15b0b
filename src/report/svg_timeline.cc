// The horizontal timeline: one row per worker (and one for the whole job),
// coloured state segments, event markers with tooltips, a time axis and a
// legend of the colours and shapes.
#include <algorithm>
#include <cmath>

#include "svg_writer.h"
#include "svg_chart.h"

namespace tenax::report {

using svg::Num;

std::string RenderTimeline(const Timeline& tl) {
  constexpr double kLabel = 150, kRight = 24, kTop = 10, kRow = 28, kBar = 18;
  const double x0 = kLabel, x1 = svg::kWidth - kRight;
  size_t points = 0;
  double end = tl.end;
  for (const TimelineRow& r : tl.rows) {
    points += r.segments.size() + r.markers.size();
    for (const TimelineSegment& s : r.segments) end = std::max(end, s.end);
    for (const TimelineMarker& m : r.markers) end = std::max(end, m.t);
  }
  if (points == 0) {
    constexpr double kEmpty = 80;
    return svg::Open(tl.name, tl.title, kEmpty, 0) + svg::NoData(svg::kWidth / 2, kEmpty / 2 + 5, tl.empty_text) +
           "</svg>";
  }
  if (!(end > 0)) end = 1;
  auto X = [&](double t) { return x0 + (x1 - x0) * std::clamp(t / end, 0.0, 1.0); };

  const double y_axis = kTop + kRow * static_cast<double>(tl.rows.size()) + 4;
  double legend_height = 0;
  const std::string legend = svg::Legend(tl.legend, x0, y_axis + 58, x1 - x0, &legend_height);
  const double height = y_axis + 58 + legend_height + 4;

  std::string body;
  std::string marks;  // drawn after the axis' grid lines, so they stay on top
  double y = kTop;
  for (size_t i = 0; i < tl.rows.size(); ++i) {
    const TimelineRow& r = tl.rows[i];
    if (i % 2 == 0) {
      body += "<rect x=\"" + Num(x0) + "\" y=\"" + Num(y) + "\" width=\"" + Num(x1 - x0) + "\" height=\"" + Num(kRow) +
              "\" fill=\"#f9fafb\"/>";
    }
    body += "<text x=\"" + Num(x0 - 10) + "\" y=\"" + Num(y + kRow / 2 + 4) +
            "\" font-size=\"13\" text-anchor=\"end\" fill=\"" + svg::kTextColor + "\">" + EscapeXml(r.label) + "</text>";
    const double bar_y = y + (kRow - kBar) / 2;
    for (const TimelineSegment& s : r.segments) {
      const double left = X(s.start);
      // At least a sliver: a state that lasted an instant still happened.
      const double w = std::max(1.5, X(s.end) - left);
      marks += "<rect class=\"mark seg\" x=\"" + Num(left) + "\" y=\"" + Num(bar_y) + "\" width=\"" + Num(w) +
               "\" height=\"" + Num(kBar) + "\" fill=\"" + EscapeXml(s.color) + "\"><title>" + EscapeXml(s.tooltip) +
               "</title></rect>";
    }
    for (const TimelineMarker& m : r.markers) {
      marks += svg::Marker(m.shape, X(m.t), y + kRow / 2, m.size, m.color, m.tooltip);
    }
    y += kRow;
  }
  std::string out = svg::Open(tl.name, tl.title, height, points);
  out += body;
  out += svg::TimeAxis(end, x0, x1, kTop, y_axis);
  out += marks;
  out += "<text x=\"" + Num((x0 + x1) / 2) + "\" y=\"" + Num(y_axis + 38) +
         "\" font-size=\"12\" text-anchor=\"middle\" fill=\"" + svg::kTextColor +
         "\">time since the run started</text>";
  out += legend;
  return out + "</svg>";
}

}  // namespace tenax::report
