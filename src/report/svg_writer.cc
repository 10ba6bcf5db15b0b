#include "svg_writer.h"

#include <cmath>
#include <cstdio>

namespace tenax::report::svg {

std::string Num(double v) {
  if (!std::isfinite(v)) v = 0;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Open(const std::string& name, const std::string& title, double height, size_t points) {
  return "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" data-chart=\"" + EscapeXml(name) +
         "\" data-points=\"" + std::to_string(points) + "\" viewBox=\"0 0 " + Num(kWidth) + " " + Num(height) +
         "\" role=\"img\" aria-label=\"" + EscapeXml(title) + "\"><title>" + EscapeXml(title) + "</title>";
}

std::string NoData(double x, double y, const std::string& text) {
  return "<text class=\"no-data\" x=\"" + Num(x) + "\" y=\"" + Num(y) +
         "\" text-anchor=\"middle\" font-size=\"15\" fill=\"#9ca3af\">" + EscapeXml(text) + "</text>";
}

std::string Marker(MarkerShape shape, double x, double y, double size, const std::string& color,
                   const std::string& tooltip) {
  const double h = size / 2;
  std::string el;
  switch (shape) {
    case MarkerShape::kTriangle:  // pointing down, at the moment it happened
      el = "<path d=\"M" + Num(x - h) + " " + Num(y - h) + "L" + Num(x + h) + " " + Num(y - h) + "L" + Num(x) + " " +
           Num(y + h) + "Z\"";
      break;
    case MarkerShape::kDiamond:
      el = "<path d=\"M" + Num(x) + " " + Num(y - h) + "L" + Num(x + h) + " " + Num(y) + "L" + Num(x) + " " +
           Num(y + h) + "L" + Num(x - h) + " " + Num(y) + "Z\"";
      break;
    case MarkerShape::kCircle:
      el = "<circle cx=\"" + Num(x) + "\" cy=\"" + Num(y) + "\" r=\"" + Num(h * 0.85) + "\"";
      break;
    case MarkerShape::kSquare:
      el = "<rect x=\"" + Num(x - h * 0.8) + "\" y=\"" + Num(y - h * 0.8) + "\" width=\"" + Num(size * 0.8) +
           "\" height=\"" + Num(size * 0.8) + "\"";
      break;
  }
  el += " class=\"mark marker\" fill=\"" + EscapeXml(color) + "\" stroke=\"#ffffff\" stroke-width=\"1.2\">";
  el += "<title>" + EscapeXml(tooltip) + "</title>";
  el += shape == MarkerShape::kCircle ? "</circle>" : shape == MarkerShape::kSquare ? "</rect>" : "</path>";
  return el;
}

std::string Legend(const std::vector<LegendEntry>& entries, double x, double y, double width, double* height) {
  std::string out;
  double cx = x, cy = y;
  constexpr double kLine = 20;
  for (const LegendEntry& e : entries) {
    // Rough text width for 12px sans-serif: wide enough for any system font.
    const double w = 22 + 7.0 * static_cast<double>(e.label.size()) + 18;
    if (cx > x && cx + w > x + width) {
      cx = x;
      cy += kLine;
    }
    if (e.shape) {
      // Legend shapes are not data marks: drawn without class "mark".
      std::string m = Marker(*e.shape, cx + 7, cy, 11, e.color, e.label);
      m.replace(m.find("class=\"mark marker\""), 19, "class=\"legend-marker\"");
      out += m;
    } else {
      out += "<rect x=\"" + Num(cx) + "\" y=\"" + Num(cy - 6) + "\" width=\"14\" height=\"12\" rx=\"2\" fill=\"" +
             EscapeXml(e.color) + "\"/>";
    }
    out += "<text x=\"" + Num(cx + 20) + "\" y=\"" + Num(cy + 4) + "\" font-size=\"12\" fill=\"" + kTextColor + "\">" +
           EscapeXml(e.label) + "</text>";
    cx += w;
  }
  *height = entries.empty() ? 0 : cy - y + kLine;
  return out;
}

std::string TimeAxis(double end, double x0, double x1, double y_top, double y_axis) {
  if (!(end > 0)) end = 1;
  const bool short_run = end < 120;
  // Time steps a reader counts in: seconds, then minutes.
  static const double kSteps[] = {0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400};
  double step = kSteps[sizeof kSteps / sizeof kSteps[0] - 1];
  for (double s : kSteps) {
    if (end / s <= 8) {
      step = s;
      break;
    }
  }
  while (end / step > 8) step *= 2;  // runs longer than days
  std::string out;
  for (int i = 0; i * step <= end * (1 + 1e-9) && i < 64; ++i) {
    const double t = i * step;
    const double x = x0 + (x1 - x0) * t / end;
    out += "<line x1=\"" + Num(x) + "\" y1=\"" + Num(y_top) + "\" x2=\"" + Num(x) + "\" y2=\"" + Num(y_axis) +
           "\" stroke=\"" + kGridColor + "\"/>";
    out += "<text x=\"" + Num(x) + "\" y=\"" + Num(y_axis + 16) + "\" font-size=\"11\" text-anchor=\"middle\" fill=\"" +
           kAxisColor + "\">" + EscapeXml(ClockText(t, short_run)) + "</text>";
  }
  out += "<line x1=\"" + Num(x0) + "\" y1=\"" + Num(y_axis) + "\" x2=\"" + Num(x1) + "\" y2=\"" + Num(y_axis) +
         "\" stroke=\"" + kAxisColor + "\"/>";
  return out;
}

}  // namespace tenax::report::svg
