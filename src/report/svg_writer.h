// Pieces shared by the report's charts (svg_chart.cc, svg_timeline.cc):
// number formatting for coordinates, the <svg class="chart"> element, the
// "no data" text, marker shapes and a wrapping legend. Internal to the
// report layer; pure functions.
#pragma once

#include <string>
#include <vector>

#include "svg_chart.h"

namespace tenax::report::svg {

inline constexpr double kWidth = 960;
inline constexpr const char* kAxisColor = "#6b7280";
inline constexpr const char* kGridColor = "#e5e7eb";
inline constexpr const char* kTextColor = "#374151";

// A coordinate with one decimal ("12.5"); non-finite values become 0.
std::string Num(double v);

// <svg class="chart" data-chart=.. data-points=.. viewBox=..> with a
// <title> for screen readers; the caller appends the body and "</svg>".
std::string Open(const std::string& name, const std::string& title, double height, size_t points);

// The visible "no data" text centred at (x, y).
std::string NoData(double x, double y, const std::string& text);

// A marker of `shape` centred at (x, y), `size` px across, class "mark".
std::string Marker(MarkerShape shape, double x, double y, double size, const std::string& color,
                   const std::string& tooltip);

// A legend laid out left to right from (x, y), wrapping at `width`; returns
// the SVG and the height it takes through `height`.
std::string Legend(const std::vector<LegendEntry>& entries, double x, double y, double width, double* height);

// Vertical grid lines and "m:ss" labels of the time axis under a plot
// spanning [x0, x1] (pixels) for [0, end] seconds, from y_top to y_axis.
std::string TimeAxis(double end, double x0, double x1, double y_top, double y_axis);

}  // namespace tenax::report::svg
