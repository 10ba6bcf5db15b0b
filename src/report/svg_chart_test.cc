// The charts' SVG: marks counted in data-points, "no data" when empty, text
// escaped, ticks and time labels a reader expects.
#include "svg_chart.h"

#include <gtest/gtest.h>

namespace tenax::report {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

TEST(SvgChart, EscapesText) {
  EXPECT_EQ(EscapeXml("<a href=\"x\">Tom & 'Jerry'</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
  EXPECT_EQ(EscapeXml("bell\x07 tab\t"), "bell? tab\t");
  EXPECT_EQ(EscapeXml(std::string("a\0b", 3)), "a?b");
  EXPECT_EQ(EscapeXml("zone é"), "zone é");  // UTF-8 passes through
}

TEST(SvgChart, ClockText) {
  EXPECT_EQ(ClockText(65, false), "1:05");
  EXPECT_EQ(ClockText(3723, false), "1:02:03");
  EXPECT_EQ(ClockText(12.5, true), "12.5 s");
  EXPECT_EQ(ClockText(30, true), "30 s");
  EXPECT_EQ(ClockText(-3, false), "0:00");
}

TEST(SvgChart, NiceTicks) {
  std::vector<double> t = NiceTicks(0.81, 0.87, 5);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_NEAR(t.front(), 0.80, 1e-12);
  EXPECT_NEAR(t.back(), 0.88, 1e-12);
  EXPECT_NEAR(t[1] - t[0], 0.02, 1e-12);
  t = NiceTicks(0, 1.25, 5);
  EXPECT_EQ(t, (std::vector<double>{0, 0.25, 0.5, 0.75, 1.0, 1.25}));
  t = NiceTicks(3, 3, 5);  // one value: a range around it
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 3);
  EXPECT_GE(t.back(), 3);
}

TEST(SvgChart, LineChartDrawsAMarkPerPoint) {
  LineChart c;
  c.name = "accuracy";
  c.title = "Test accuracy";
  c.series.push_back({"this run", "#2563eb", false, {{10, 0.8}, {20, 0.85}, {30, 0.87}}});
  c.series.push_back({"<reference>", "#999", true, {{12, 0.81}, {24, 0.86}}});
  c.markers.push_back({15, "#dc2626", "kill worker 1 & more"});
  c.markers_legend = "faults";
  c.y_floor = 0;
  c.y_ceiling = 1;
  const std::string svg = RenderLineChart(c);
  EXPECT_EQ(svg.rfind("<svg class=\"chart\"", 0), 0u);
  EXPECT_NE(svg.find("data-chart=\"accuracy\" data-points=\"5\""), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"mark\""), 5u);
  EXPECT_EQ(Count(svg, "<polyline"), 2u);
  EXPECT_EQ(Count(svg, "stroke-dasharray=\"7 4\""), 2u);  // the dashed series and its legend line
  EXPECT_NE(svg.find("&lt;reference&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<reference>"), std::string::npos);
  EXPECT_NE(svg.find("kill worker 1 &amp; more"), std::string::npos);
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 6), "</svg>");
}

TEST(SvgChart, EmptyChartsSayNoData) {
  LineChart line;
  line.name = "loss";
  line.series.push_back({"this run", "#000", false, {}});
  std::string svg = RenderLineChart(line);
  EXPECT_NE(svg.find("data-points=\"0\""), std::string::npos);
  EXPECT_NE(svg.find(">no data</text>"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"mark"), 0u);

  Timeline tl;
  tl.name = "workers";
  tl.rows.push_back({"worker 0", {}, {}});
  svg = RenderTimeline(tl);
  EXPECT_NE(svg.find("data-points=\"0\""), std::string::npos);
  EXPECT_NE(svg.find(">no data</text>"), std::string::npos);

  BarChart bars;
  bars.name = "cost";
  bars.empty_text = "no data: no price table was given";
  svg = RenderBarChart(bars);
  EXPECT_NE(svg.find("data-points=\"0\""), std::string::npos);
  EXPECT_NE(svg.find(">no data: no price table was given</text>"), std::string::npos);
}

TEST(SvgChart, TimelineSegmentsAndMarkersAreMarks) {
  Timeline tl;
  tl.name = "workers";
  tl.end = 100;
  tl.rows.push_back({"worker 0",
                     {{0, 40, "#22c55e", "worker 0: active"}, {40, 40, "#ef4444", "killed <now>"}},
                     {{40, MarkerShape::kTriangle, "#dc2626", "kill \"worker 0\""}}});
  tl.rows.push_back({"job", {}, {{70, MarkerShape::kSquare, "#4b5563", "notice"}}});
  tl.legend = {{"active", "#22c55e", std::nullopt}, {"fault", "#dc2626", MarkerShape::kTriangle}};
  const std::string svg = RenderTimeline(tl);
  EXPECT_NE(svg.find("data-chart=\"workers\" data-points=\"4\""), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"mark seg\""), 2u);
  EXPECT_EQ(Count(svg, "class=\"mark marker\""), 2u);
  EXPECT_EQ(Count(svg, "class=\"legend-marker\""), 1u);  // legends are not data
  // An instant still gets a visible sliver.
  EXPECT_NE(svg.find("width=\"1.5\" height=\"18.0\" fill=\"#ef4444\""), std::string::npos);
  EXPECT_NE(svg.find("<title>killed &lt;now&gt;</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>kill &quot;worker 0&quot;</title>"), std::string::npos);
  EXPECT_NE(svg.find(">worker 0</text>"), std::string::npos);
}

TEST(SvgChart, BarsOfZeroDrawOnlyTheirLabel) {
  BarChart c;
  c.name = "bytes";
  c.bars = {{"gradients", 1e9, "1.0 GB", "#00f"}, {"shuffling", 0, "0 B", "#f90"}, {"recovery", 4e6, "4.0 MB", "#f00"}};
  const std::string svg = RenderBarChart(c);
  EXPECT_NE(svg.find("data-points=\"2\""), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"mark\""), 2u);
  EXPECT_NE(svg.find(">shuffling</text>"), std::string::npos);
  EXPECT_NE(svg.find(">0 B</text>"), std::string::npos);
  // The largest bar spans the plot; a small one keeps at least 2 px.
  EXPECT_NE(svg.find("width=\"530.0\""), std::string::npos);
  EXPECT_NE(svg.find("width=\"2.1\""), std::string::npos);
}

}  // namespace
}  // namespace tenax::report
