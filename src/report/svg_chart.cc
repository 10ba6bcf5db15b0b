// Escaping, ticks, the line chart and the bar chart (the timeline is in
// svg_timeline.cc).
#include "svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "svg_writer.h"

namespace tenax::report {

using svg::Num;

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string ClockText(double seconds, bool short_run) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  char buf[64];
  if (short_run && seconds < 60) {
    std::snprintf(buf, sizeof buf, seconds == std::floor(seconds) ? "%.0f s" : "%.1f s", seconds);
    return buf;
  }
  const auto total = static_cast<long long>(std::llround(std::min(seconds, 1e15)));
  const long long h = total / 3600, m = total / 60 % 60, s = total % 60;
  if (h > 0) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", h, m, s);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", m, s);
  }
  return buf;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    const double pad = std::max(std::fabs(hi) * 0.05, 1e-3);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  if (!std::isfinite(step) || step <= 0) return {lo, hi};
  std::vector<double> ticks;
  const double first = std::floor(lo / step) * step;
  for (int i = 0; i < 100; ++i) {
    const double v = first + i * step;
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
    if (v >= hi - step * 1e-9) break;
  }
  return ticks;
}

namespace {

// The y axis' ticks over every point, clamped to [floor, ceiling].
std::vector<double> ValueTicks(const LineChart& c) {
  double lo = INFINITY, hi = -INFINITY;
  for (const LineSeries& s : c.series) {
    for (const TimePoint& p : s.points) lo = std::min(lo, p.value), hi = std::max(hi, p.value);
  }
  std::vector<double> ticks = NiceTicks(lo, hi, 5);
  std::vector<double> kept;
  for (double v : ticks) {
    if (c.y_floor && v < *c.y_floor - 1e-12) continue;
    if (c.y_ceiling && v > *c.y_ceiling + 1e-12) continue;
    kept.push_back(v);
  }
  if (kept.size() < 2) return ticks;
  // Clamping may cut off the data's own range (a value above the ceiling):
  // keep the unclamped axis then, the data comes first.
  if (lo < kept.front() || hi > kept.back()) return ticks;
  return kept;
}

}  // namespace

std::string RenderLineChart(const LineChart& c) {
  constexpr double kLeft = 72, kRight = 24, kTop = 40, kPlot = 240, kHeight = kTop + kPlot + 48;
  const double x0 = kLeft, x1 = svg::kWidth - kRight, y0 = kTop, y1 = kTop + kPlot;
  size_t points = 0;
  double end = c.x_max;
  for (const LineSeries& s : c.series) {
    points += s.points.size();
    for (const TimePoint& p : s.points) end = std::max(end, p.t);
  }
  std::string out = svg::Open(c.name, c.title, kHeight, points);
  if (points == 0) {
    out += svg::NoData(svg::kWidth / 2, kHeight / 2, c.empty_text);
    return out + "</svg>";
  }
  if (!(end > 0)) end = 1;
  const std::vector<double> ticks = ValueTicks(c);
  const double vlo = ticks.front(), vhi = ticks.back() > vlo ? ticks.back() : vlo + 1;
  auto X = [&](double t) { return x0 + (x1 - x0) * std::clamp(t / end, 0.0, 1.0); };
  auto Y = [&](double v) { return y1 - (y1 - y0) * std::clamp((v - vlo) / (vhi - vlo), 0.0, 1.0); };
  const auto fmt = c.y_format ? c.y_format : [](double v) { return Num(v); };

  for (double v : ticks) {
    out += "<line x1=\"" + Num(x0) + "\" y1=\"" + Num(Y(v)) + "\" x2=\"" + Num(x1) + "\" y2=\"" + Num(Y(v)) +
           "\" stroke=\"" + svg::kGridColor + "\"/>";
    out += "<text x=\"" + Num(x0 - 8) + "\" y=\"" + Num(Y(v) + 4) + "\" font-size=\"11\" text-anchor=\"end\" fill=\"" +
           svg::kAxisColor + "\">" + EscapeXml(fmt(v)) + "</text>";
  }
  out += svg::TimeAxis(end, x0, x1, y0, y1);
  out += "<line x1=\"" + Num(x0) + "\" y1=\"" + Num(y0) + "\" x2=\"" + Num(x0) + "\" y2=\"" + Num(y1) + "\" stroke=\"" +
         svg::kAxisColor + "\"/>";
  out += "<text transform=\"translate(16 " + Num((y0 + y1) / 2) +
         ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\" fill=\"" + svg::kTextColor + "\">" +
         EscapeXml(c.y_label) + "</text>";
  out += "<text x=\"" + Num((x0 + x1) / 2) + "\" y=\"" + Num(kHeight - 6) +
         "\" font-size=\"12\" text-anchor=\"middle\" fill=\"" + svg::kTextColor +
         "\">time since the run started</text>";

  for (const TimeMarker& m : c.markers) {
    out += "<line class=\"time-marker\" x1=\"" + Num(X(m.t)) + "\" y1=\"" + Num(y0) + "\" x2=\"" + Num(X(m.t)) +
           "\" y2=\"" + Num(y1) + "\" stroke=\"" + EscapeXml(m.color) +
           "\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\" opacity=\"0.7\"><title>" + EscapeXml(m.tooltip) +
           "</title></line>";
  }
  const bool short_run = end < 120;
  for (const LineSeries& s : c.series) {
    if (s.points.empty()) continue;
    std::string path;
    for (const TimePoint& p : s.points) path += (path.empty() ? "" : " ") + Num(X(p.t)) + "," + Num(Y(p.value));
    out += "<polyline class=\"line\" fill=\"none\" stroke=\"" + EscapeXml(s.color) + "\" stroke-width=\"2\"" +
           (s.dashed ? " stroke-dasharray=\"7 4\"" : "") + " points=\"" + path + "\"/>";
    const double r = s.points.size() > 80 ? 1.8 : 3;
    for (const TimePoint& p : s.points) {
      out += "<circle class=\"mark\" cx=\"" + Num(X(p.t)) + "\" cy=\"" + Num(Y(p.value)) + "\" r=\"" + Num(r) +
             "\" fill=\"" + EscapeXml(s.color) + "\"><title>" +
             EscapeXml(s.name + ": " + fmt(p.value) + " at " + ClockText(p.t, short_run)) + "</title></circle>";
    }
  }

  // The legend: each series as a short line, solid or dashed like its curve.
  double lx = x0;
  for (const LineSeries& s : c.series) {
    out += "<line x1=\"" + Num(lx) + "\" y1=\"17\" x2=\"" + Num(lx + 26) + "\" y2=\"17\" stroke=\"" +
           EscapeXml(s.color) + "\" stroke-width=\"2.5\"" + (s.dashed ? " stroke-dasharray=\"7 4\"" : "") + "/>";
    out += "<text x=\"" + Num(lx + 32) + "\" y=\"21\" font-size=\"12\" fill=\"" + svg::kTextColor + "\">" +
           EscapeXml(s.name) + "</text>";
    lx += 32 + 7.0 * static_cast<double>(s.name.size()) + 24;
  }
  if (!c.markers.empty() && !c.markers_legend.empty()) {
    const double mx = x1 - 7.0 * static_cast<double>(c.markers_legend.size()) - 30;
    out += "<line x1=\"" + Num(mx) + "\" y1=\"10\" x2=\"" + Num(mx) + "\" y2=\"24\" stroke=\"" +
           EscapeXml(c.markers.front().color) + "\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>";
    out += "<text x=\"" + Num(mx + 8) + "\" y=\"21\" font-size=\"12\" fill=\"" + svg::kTextColor + "\">" +
           EscapeXml(c.markers_legend) + "</text>";
  }
  return out + "</svg>";
}

std::string RenderBarChart(const BarChart& c) {
  constexpr double kLabel = 170, kRow = 32, kTop = 12, kValue = 260;
  size_t points = 0;
  double max = 0;
  for (const Bar& b : c.bars) {
    if (b.value > 0 && std::isfinite(b.value)) ++points, max = std::max(max, b.value);
  }
  if (points == 0) {
    constexpr double kEmpty = 80;
    return svg::Open(c.name, c.title, kEmpty, 0) + svg::NoData(svg::kWidth / 2, kEmpty / 2 + 5, c.empty_text) +
           "</svg>";
  }
  const double height = kTop * 2 + kRow * static_cast<double>(c.bars.size());
  const double x0 = kLabel, x1 = svg::kWidth - kValue;
  std::string out = svg::Open(c.name, c.title, height, points);
  double y = kTop;
  for (const Bar& b : c.bars) {
    out += "<text x=\"" + Num(x0 - 12) + "\" y=\"" + Num(y + kRow / 2 + 4) +
           "\" font-size=\"13\" text-anchor=\"end\" fill=\"" + svg::kTextColor + "\">" + EscapeXml(b.label) + "</text>";
    double w = 0;
    if (b.value > 0 && std::isfinite(b.value)) {
      w = std::max(2.0, (x1 - x0) * b.value / max);
      out += "<rect class=\"mark\" x=\"" + Num(x0) + "\" y=\"" + Num(y + 5) + "\" width=\"" + Num(w) + "\" height=\"" +
             Num(kRow - 10) + "\" rx=\"3\" fill=\"" + EscapeXml(b.color) + "\"><title>" +
             EscapeXml(b.label + ": " + b.value_text) + "</title></rect>";
    }
    out += "<text x=\"" + Num(x0 + w + 8) + "\" y=\"" + Num(y + kRow / 2 + 4) + "\" font-size=\"12\" fill=\"" +
           svg::kAxisColor + "\">" + EscapeXml(b.value_text) + "</text>";
    y += kRow;
  }
  out += "<line x1=\"" + Num(x0) + "\" y1=\"" + Num(kTop) + "\" x2=\"" + Num(x0) + "\" y2=\"" + Num(height - kTop) +
         "\" stroke=\"" + svg::kAxisColor + "\"/>";
  return out + "</svg>";
}

}  // namespace tenax::report
