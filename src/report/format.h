// Numbers as a reader of the report wants them: "87.3%", "1.2 GB",
// "4 min 12 s", "$0.42". Internal to the report layer; pure functions,
// non-finite input prints as "-".
#pragma once

#include <string>

namespace tenax::report {

std::string FixedText(double v, int digits);
std::string PercentText(double fraction, int digits = 1);  // 0.873 -> "87.3%"
// A difference of two fractions in percentage points, signed: "+0.4", "-1.2".
std::string PointsText(double fraction_diff);
std::string BytesText(double bytes);     // decimal units: "1.2 GB"
std::string DurationText(double seconds);  // "12.3 s", "4 min 12 s", "1 h 02 min"
std::string MoneyText(double amount, const std::string& currency);  // "$0.42", "0.42 EUR"

}  // namespace tenax::report
