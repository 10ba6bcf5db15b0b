// The report's charts built from a RunRecord: which series, colours, markers
// and legends each one shows. Internal to the report layer; pure functions
// returning inline SVG (svg_chart.h).
#pragma once

#include <string>

#include "tenax/report/run_record.h"

namespace tenax::report {

// The colour of a worker state ("active" green, "killed" red, ...); unknown
// states share one colour.
const char* StateColor(const std::string& state);
// The colour of an event kind (fault red, straggler orange, ...).
const char* EventColor(EventKind kind);

std::string AccuracyChartSvg(const RunRecord& rec);  // data-chart="accuracy"
std::string LossChartSvg(const RunRecord& rec);      // data-chart="loss"
std::string WorkersTimelineSvg(const RunRecord& rec);  // data-chart="workers"
std::string BytesChartSvg(const RunRecord& rec);     // data-chart="bytes"
std::string CostChartSvg(const RunRecord& rec);      // data-chart="cost"

}  // namespace tenax::report
