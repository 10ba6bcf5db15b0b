#include "tenax/sched/probe/link_matrix.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace tenax::sched {
namespace {

std::pair<std::string, std::string> Key(const std::string& a, const std::string& b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

}  // namespace

LinkMatrix::LinkMatrix(double half_life_seconds) : half_life_(half_life_seconds > 0 ? half_life_seconds : 60.0) {}

LinkMatrix::LinkMatrix(LinkMatrix&& other) noexcept : half_life_(other.half_life_) {
  std::lock_guard<std::mutex> lock(other.mu_);
  pairs_ = std::move(other.pairs_);
}

LinkMatrix& LinkMatrix::operator=(LinkMatrix&& other) noexcept {
  if (this != &other) {
    std::scoped_lock lock(mu_, other.mu_);
    half_life_ = other.half_life_;
    pairs_ = std::move(other.pairs_);
  }
  return *this;
}

void LinkMatrix::Add(const std::string& a, const std::string& b, const LinkSample& s, bool reachable, double now) {
  if (a == b) return;
  std::lock_guard<std::mutex> lock(mu_);
  Pair& p = pairs_[Key(a, b)];
  if (p.samples > 0) {
    const double age = std::max(0.0, now - p.last_seconds);
    const double decay = std::pow(0.5, age / half_life_);
    p.weight *= decay;
    p.rtt_sum *= decay;
    p.loss_sum *= decay;
    p.tp_sum *= decay;
  }
  p.weight += 1.0;
  p.loss_sum += s.loss;
  if (reachable) {
    p.rtt_sum += s.rtt_ms;
    p.tp_sum += s.throughput_gbps;
  } else {
    // No answer: delay and throughput unknown. Keep their means as they
    // were by adding the current mean (or nothing for a first sample).
    if (p.weight > 1.0) {
      const double old = p.weight - 1.0;
      p.rtt_sum += p.rtt_sum / old;
      p.tp_sum += p.tp_sum / old;
    }
  }
  p.last_seconds = now;
  p.samples += 1;
  p.reachable = reachable;
}

void LinkMatrix::Observe(const std::string& a, const std::string& b, const LinkSample& sample, double now_seconds) {
  LinkSample s = sample;
  s.loss = std::clamp(s.loss, 0.0, 1.0);
  Add(a, b, s, true, now_seconds);
}

void LinkMatrix::ObserveUnreachable(const std::string& a, const std::string& b, double now_seconds) {
  Add(a, b, LinkSample{0, 1.0, 0}, false, now_seconds);
}

std::optional<LinkMetrics> LinkMatrix::Link(const NodeState& a, const NodeState& b) const {
  return Link(a.name, b.name);
}

std::optional<LinkMetrics> LinkMatrix::Link(const std::string& a, const std::string& b) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pairs_.find(Key(a, b));
  if (it == pairs_.end() || it->second.weight <= 0) return std::nullopt;
  const Pair& p = it->second;
  LinkMetrics m;
  m.rtt_ms = p.rtt_sum / p.weight;
  m.loss = p.loss_sum / p.weight;
  m.throughput_gbps = p.tp_sum / p.weight;
  m.reachable = p.reachable;
  return m;
}

std::vector<LinkMatrix::Entry> LinkMatrix::Entries() const {
  std::vector<Entry> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.reserve(pairs_.size());
    for (const auto& [key, p] : pairs_) {
      if (p.weight <= 0) continue;
      Entry e;
      e.a = key.first;
      e.b = key.second;
      e.metrics = LinkMetrics{p.rtt_sum / p.weight, p.loss_sum / p.weight, p.tp_sum / p.weight, p.reachable};
      e.last_seconds = p.last_seconds;
      e.samples = p.samples;
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::string LinkMatrix::ToJson() const {
  nlohmann::json links = nlohmann::json::array();
  for (const Entry& e : Entries()) {
    links.push_back({{"a", e.a},
                     {"b", e.b},
                     {"rtt_ms", e.metrics.rtt_ms},
                     {"loss", e.metrics.loss},
                     {"throughput_gbps", e.metrics.throughput_gbps},
                     {"reachable", e.metrics.reachable}});
  }
  nlohmann::json doc{{"half_life_seconds", half_life_}, {"links", std::move(links)}};
  return doc.dump(1);
}

Result<LinkMatrix> LinkMatrix::FromJson(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("link matrix: not valid JSON");
  if (!doc.is_object()) return InvalidArgument("link matrix: expected a JSON object with \"links\"");
  double half_life = 60.0;
  if (auto it = doc.find("half_life_seconds"); it != doc.end()) {
    if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>())) {
      return InvalidArgument("link matrix: half_life_seconds must be a positive number");
    }
    half_life = it->get<double>();
  }
  auto links = doc.find("links");
  if (links == doc.end() || !links->is_array()) return InvalidArgument("link matrix: \"links\" must be an array");
  LinkMatrix m(half_life);
  size_t i = 0;
  for (const auto& l : *links) {
    const std::string where = "link matrix: links[" + std::to_string(i++) + "]";
    if (!l.is_object()) return InvalidArgument(where + ": expected an object");
    auto str = [&](const char* k) -> const nlohmann::json* {
      auto it = l.find(k);
      return it != l.end() && it->is_string() && !it->get_ref<const std::string&>().empty() ? &*it : nullptr;
    };
    auto num = [&](const char* k, double lo, double hi, double* out) -> Status {
      auto it = l.find(k);
      if (it == l.end() || !it->is_number()) return InvalidArgument(where + ": \"" + k + "\" must be a number");
      const double v = it->get<double>();
      if (!std::isfinite(v) || v < lo || v > hi) {
        return InvalidArgument(where + ": \"" + k + "\" = " + std::to_string(v) + " is outside " +
                               std::to_string(lo) + ".." + std::to_string(hi));
      }
      *out = v;
      return Status::Ok();
    };
    const nlohmann::json* a = str("a");
    const nlohmann::json* b = str("b");
    if (a == nullptr || b == nullptr) return InvalidArgument(where + ": \"a\" and \"b\" must be node names");
    if (*a == *b) return InvalidArgument(where + ": a link joins two different nodes");
    LinkSample s;
    if (Status st = num("rtt_ms", 0, 1e6, &s.rtt_ms); !st.ok()) return st;
    if (Status st = num("loss", 0, 1, &s.loss); !st.ok()) return st;
    if (Status st = num("throughput_gbps", 0, 1e6, &s.throughput_gbps); !st.ok()) return st;
    bool reachable = true;
    if (auto it = l.find("reachable"); it != l.end()) {
      if (!it->is_boolean()) return InvalidArgument(where + ": \"reachable\" must be true or false");
      reachable = it->get<bool>();
    }
    m.Add(a->get<std::string>(), b->get<std::string>(), s, reachable, 0.0);
  }
  return m;
}

}  // namespace tenax::sched
