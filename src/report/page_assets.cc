#include "page_assets.h"

namespace tenax::report {

const char kReportStyle[] = R"css(
:root { --fg: #111827; --muted: #6b7280; --line: #e5e7eb; --bg: #f3f4f6; --card: #ffffff; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 20px 40px; }
header h1 { font-size: 22px; margin: 0 0 2px; }
header .sub { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(210px, 1fr)); gap: 12px; margin: 16px 0; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 16px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 26px; font-weight: 650; line-height: 1.3; }
.card .note { font-size: 13px; color: var(--muted); }
.good { color: #15803d; } .warn { color: #b45309; } .bad { color: #b91c1c; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 16px 20px; margin: 16px 0; }
section h2 { font-size: 16px; margin: 0 0 4px; }
section p.what { color: var(--muted); margin: 0 0 10px; font-size: 13px; }
svg.chart { width: 100%; height: auto; display: block; font-family: inherit; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.num { white-space: nowrap; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 0 8px; border-radius: 9px; font-size: 12px; color: #fff; white-space: nowrap; }
.events { max-height: 560px; overflow-y: auto; }
.banner { background: #fef3c7; border: 1px solid #f59e0b; border-radius: 8px; padding: 10px 14px; margin: 12px 0; }
footer { color: var(--muted); font-size: 12px; }
footer pre { font-size: 11px; white-space: pre-wrap; margin: 4px 0 0; }
)css";

const char kRenderCheckScript[] = R"js(
(function () {
  function check() {
    var lines = [];
    var charts = document.querySelectorAll('svg.chart');
    for (var i = 0; i < charts.length; i++) {
      var marks = charts[i].querySelectorAll('.mark');
      var drawn = 0;
      for (var j = 0; j < marks.length; j++) {
        var box = marks[j].getBBox();
        if (box.width > 0 || box.height > 0) drawn++;
      }
      lines.push('chart=' + charts[i].getAttribute('data-chart') + ' marks=' + drawn +
                 ' points=' + charts[i].getAttribute('data-points'));
    }
    document.getElementById('render-check').textContent = lines.join('\n');
  }
  if (document.readyState === 'complete') check(); else window.addEventListener('load', check);
})();
)js";

}  // namespace tenax::report
