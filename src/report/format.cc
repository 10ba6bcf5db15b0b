#include "format.h"

#include <cmath>
#include <cstdio>

namespace tenax::report {

std::string FixedText(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string PercentText(double fraction, int digits) {
  if (!std::isfinite(fraction)) return "-";
  return FixedText(fraction * 100, digits) + "%";
}

std::string PointsText(double fraction_diff) {
  if (!std::isfinite(fraction_diff)) return "-";
  const double points = fraction_diff * 100;
  // "-0.0" reads as a loss; a difference that rounds to zero is "0.0".
  if (std::fabs(points) < 0.05) return "0.0";
  return (points > 0 ? "+" : "") + FixedText(points, 1);
}

std::string BytesText(double bytes) {
  if (!std::isfinite(bytes)) return "-";
  static const char* kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000 && u < 5) bytes /= 1000, ++u;
  return FixedText(bytes, u == 0 ? 0 : 1) + " " + kUnits[u];
}

std::string DurationText(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 60) return FixedText(seconds, seconds < 10 ? 2 : 1) + " s";
  const auto total = static_cast<long long>(std::llround(std::fmin(seconds, 1e15)));
  char buf[64];
  if (total < 3600) {
    std::snprintf(buf, sizeof buf, "%lld min %lld s", total / 60, total % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", total / 3600, total / 60 % 60);
  }
  return buf;
}

std::string MoneyText(double amount, const std::string& currency) {
  if (!std::isfinite(amount)) return "-";
  const int digits = std::fabs(amount) < 1 ? 4 : 2;
  if (currency.empty() || currency == "USD") return "$" + FixedText(amount, digits);
  return FixedText(amount, digits) + " " + currency;
}

}  // namespace tenax::report
