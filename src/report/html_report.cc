// The page's structure: headline cards, one section per chart, the faults
// table, the event list, placement and what the loader skipped.
#include "tenax/report/html_report.h"

#include <cmath>

#include "format.h"
#include "page_assets.h"
#include "report_charts.h"
#include "tenax/core/files.h"
#include "tenax/core/run_dir.h"
#include "svg_chart.h"

namespace tenax::report {
namespace {

constexpr size_t kMaxEventRows = 1000;

std::string H(const std::string& text) { return EscapeXml(text); }

std::string Card(const std::string& label, const std::string& value, const std::string& note,
                 const std::string& value_class = "") {
  return "<div class=\"card\"><div class=\"label\">" + H(label) + "</div><div class=\"value" +
         (value_class.empty() ? "" : " " + value_class) + "\">" + H(value) + "</div><div class=\"note\">" + H(note) +
         "</div></div>";
}

std::string Section(const std::string& id, const std::string& title, const std::string& what,
                    const std::string& body) {
  return "<section id=\"" + id + "\"><h2>" + H(title) + "</h2>" +
         (what.empty() ? "" : "<p class=\"what\">" + H(what) + "</p>") + body + "</section>\n";
}

std::string Header(const RunRecord& r) {
  std::string title = "tenax run" + (r.job_id.empty() ? std::string() : ": " + r.job_id);
  std::string sub;
  auto add = [&](const std::string& s) { sub += (sub.empty() ? "" : " · ") + s; };
  if (!r.mode.empty()) add("mode " + r.mode);
  if (!r.model.empty()) add("model " + r.model);
  if (r.epochs) add(std::to_string(*r.epochs) + " epochs");
  if (r.steps) add(std::to_string(*r.steps) + " steps");
  add(r.dir);
  std::string out = "<header><h1>" + H(title) + "</h1><div class=\"sub\">" + H(sub) + "</div></header>";
  if (!r.finished) {
    out += "<div class=\"banner\"><b>The run did not finish</b> (no summary.json): this report shows what "
           "metrics.jsonl recorded until it stopped.</div>";
  }
  return out;
}

std::string Headline(const RunRecord& r) {
  std::string cards;
  {
    std::string value = r.final_test_accuracy ? PercentText(*r.final_test_accuracy, 2) : "-";
    std::string note, cls;
    if (r.reference_test_accuracy) {
      note = "fault-free reference " + PercentText(*r.reference_test_accuracy, 2);
      if (r.final_test_accuracy) {
        const double diff = *r.final_test_accuracy - *r.reference_test_accuracy;
        note += " (" + PointsText(diff) + " points)";
        cls = diff >= -0.01 ? "good" : "warn";  // issue 14: within 1 point of the reference
      }
    } else {
      note = "no fault-free reference run";
    }
    cards += Card("Final test accuracy", value, note, cls);
  }
  {
    std::string note = r.finished ? "launch to summary" : "until the last record";
    cards += Card("Wall time", DurationText(r.wall_seconds ? *r.wall_seconds : r.end_seconds), note);
  }
  {
    size_t recovered = 0, known = 0, unplanned = 0;
    for (const FaultReaction& f : r.faults) {
      if (f.recovered) ++known, recovered += *f.recovered ? 1 : 0;
      if (!f.planned) ++unplanned;
    }
    std::string note = known > 0 ? std::to_string(recovered) + " of " + std::to_string(known) + " recovered"
                                 : (r.faults.empty() ? "none injected" : "reactions not recorded");
    // A worker that failed on its own is not an injected fault, but the
    // headline must not hide it.
    if (unplanned > 0) note += "; " + std::to_string(unplanned) + " worker failure" + (unplanned == 1 ? "" : "s") + " nobody planned";
    cards += Card("Faults injected", std::to_string(r.faults.size() - unplanned), note,
                  (known > 0 && recovered < known) || unplanned > 0 ? "warn" : "");
  }
  if (r.cost) {
    cards += Card("Cost", MoneyText(r.cost->total, r.cost->currency), "at the price table's rates");
  }
  return "<div class=\"cards\">" + cards + "</div>";
}

std::string FaultsTable(const RunRecord& r) {
  if (r.faults.empty()) return "<p>No fault was injected.</p>";
  const bool short_run = r.end_seconds < 120;
  std::string out =
      "<table><thead><tr><th>Fault</th><th>At (since the run started, as the charts)</th><th>Reaction</th>"
      "<th>Time to recover</th></tr></thead><tbody>";
  for (const FaultReaction& f : r.faults) {
    std::string recover = "-";
    if (f.recovered_seconds) {
      recover = DurationText(*f.recovered_seconds);
    } else if (f.recovered && !*f.recovered) {
      recover = "not recovered";
    }
    std::string cls = f.recovered && !*f.recovered ? " bad" : "";
    out += "<tr><td>" + H(f.fault) + "</td><td class=\"num\">" +
           H(f.at_seconds ? ClockText(*f.at_seconds, short_run) : "-") + "</td><td>" +
           H(f.reaction.empty() ? "not recorded" : f.reaction) + "</td><td class=\"num" + cls + "\">" + H(recover) +
           "</td></tr>";
  }
  return out + "</tbody></table>";
}

std::string EventList(const RunRecord& r) {
  if (r.events.empty()) return "<p>No event was recorded.</p>";
  const bool short_run = r.end_seconds < 120;
  std::string out = "<div class=\"events\"><table><thead><tr><th>Time</th><th>Kind</th><th>What happened</th></tr>"
                    "</thead><tbody>";
  size_t shown = 0;
  for (const RunEvent& e : r.events) {
    if (shown++ == kMaxEventRows) break;
    out += "<tr><td class=\"num\">" + H(ClockText(e.t, short_run)) + "</td><td><span class=\"badge\" style=\"background:" +
           EventColor(e.kind) + "\">" + EventKindName(e.kind) + "</span></td><td>" + H(e.text) + "</td></tr>";
  }
  out += "</tbody></table></div>";
  if (r.events.size() > kMaxEventRows) {
    out += "<p>... and " + std::to_string(r.events.size() - kMaxEventRows) + " more in metrics.jsonl.</p>";
  }
  return out;
}

std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string out = "<table><tbody>";
  for (const auto& [k, v] : kv) out += "<tr><th>" + H(k) + "</th><td>" + H(v) + "</td></tr>";
  return out + "</tbody></table>";
}

std::string CostSection(const RunRecord& r) {
  std::string what = r.cost ? "What each role's processes cost at the job's price table ([cost] prices), total " +
                                  MoneyText(r.cost->total, r.cost->currency) + "."
                            : "No price table was given (set [cost] prices in the job file to see what the run cost).";
  return Section("cost", "Cost", what, CostChartSvg(r));
}

}  // namespace

std::string RenderReportHtml(const RunRecord& r) {
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>" +
      H("tenax report" + (r.job_id.empty() ? std::string() : ": " + r.job_id)) + "</title><style>" + kReportStyle +
      "</style></head>\n<body><main>\n";
  page += Header(r) + Headline(r) + "\n";
  page += Section("accuracy", "Test accuracy vs time",
                  "Accuracy on the test set after every epoch, this run against the same job without faults; dashed "
                  "red lines mark the injected faults.",
                  AccuracyChartSvg(r));
  page += Section("loss", "Training loss vs time", "Mean training loss of every logging interval.", LossChartSvg(r));
  page += Section("workers", "Workers",
                  "Each worker's state over time; markers show faults, stragglers, recoveries and the launcher's "
                  "notices (hover for details). The job row holds events not tied to one worker.",
                  WorkersTimelineSvg(r));
  page += Section("bytes", "Bytes moved by purpose",
                  "Gradients exchanged between workers, models pushed and pulled, data rebuilt by recovery and "
                  "partitions moved by shuffling.",
                  BytesChartSvg(r));
  page += CostSection(r);
  page += Section("faults", "Faults and reactions", "Every injected fault and every failure nobody planned, what the system did and how long it took.",
                  FaultsTable(r));
  page += Section("events", "Events", "", EventList(r));
  if (!r.placement.empty()) page += Section("placement", "Placement", "", KeyValues(r.placement));
  page += "<footer>";
  if (!r.warnings.empty()) {
    page += "<p>Skipped while reading the run:</p><ul>";
    for (const std::string& w : r.warnings) page += "<li>" + H(w) + "</li>";
    page += "</ul>";
  }
  page += "<p>Generated by <code>tenax report " + H(r.dir) + "</code> from " + std::to_string(r.records) +
          " records of metrics.jsonl.</p><pre id=\"render-check\">render check: the page's script did not run</pre>"
          "</footer>\n</main><script>" +
          kRenderCheckScript + "</script></body></html>\n";
  return page;
}

Result<ReportWritten> WriteReport(const std::string& dir, const std::string& out_path) {
  TENAX_ASSIGN_OR_RETURN(RunRecord record, LoadRunRecord(dir));
  ReportWritten w;
  w.path = out_path.empty() ? RunDir(dir).report() : out_path;
  const std::string html = RenderReportHtml(record);
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(w.path, html));
  w.events = record.events.size();
  w.finished = record.finished;
  // Charts with data: the data-points attributes that are not "0".
  for (size_t at = html.find("data-points=\""); at != std::string::npos; at = html.find("data-points=\"", at + 1)) {
    if (html.compare(at + 13, 2, "0\"") != 0) ++w.charts_with_data;
  }
  return w;
}

}  // namespace tenax::report
