// The report page's inline stylesheet and its render-check script. Kept
// apart from the page's structure (html_report.cc) so each reads on its own.
#pragma once

namespace tenax::report {

// CSS for the page: cards, sections, tables, charts scale to the width.
extern const char kReportStyle[];

// On load, counts for every svg.chart the elements of class "mark" that the
// browser actually laid out (a non-empty getBBox()) and writes
// "chart=NAME marks=K points=N" lines into <pre id="render-check">.
extern const char kRenderCheckScript[];

}  // namespace tenax::report
