#include "tenax/net/link_faults.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tenax/core/files.h"

namespace tenax::net {
namespace {

constexpr size_t kMaxFaults = 4096;
constexpr size_t kMaxFileBytes = 4 << 20;

bool SameLink(const LinkFault& f, const std::string& x, const std::string& y) {
  return (f.a == x && f.b == y) || (f.a == y && f.b == x);
}

}  // namespace

const char* LinkFaultKindName(LinkFaultKind kind) { return kind == LinkFaultKind::kDrop ? "drop" : "slow"; }

int64_t WallMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<LinkFault> LinkFaultBook::Active(const std::string& x, const std::string& y, int64_t now_ms) const {
  std::optional<LinkFault> best;
  for (const LinkFault& f : faults) {
    if (now_ms < f.from_ms || now_ms >= f.until_ms || !SameLink(f, x, y)) continue;
    if (!best) {
      best = f;
    } else if (f.kind == LinkFaultKind::kDrop) {
      // Two drops: the one that lasts longer.
      if (best->kind != LinkFaultKind::kDrop || f.until_ms > best->until_ms) best = f;
    } else if (best->kind == LinkFaultKind::kSlow && f.factor > best->factor) {
      best = f;
    }
  }
  return best;
}

void LinkFaultBook::Prune(int64_t now_ms) {
  std::erase_if(faults, [now_ms](const LinkFault& f) { return f.until_ms <= now_ms; });
}

std::string LinkFaultBook::ToJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const LinkFault& f : faults) {
    nlohmann::json j{{"hosts", {f.a, f.b}}, {"kind", LinkFaultKindName(f.kind)}, {"from_ms", f.from_ms},
                     {"until_ms", f.until_ms}};
    if (f.kind == LinkFaultKind::kSlow) j["factor"] = f.factor;
    if (f.kind == LinkFaultKind::kSlow && f.delay_ms > 0) j["delay_ms"] = f.delay_ms;
    list.push_back(std::move(j));
  }
  return nlohmann::json{{"faults", list}}.dump(1);
}

Status LinkFaultBook::WriteTo(const std::string& path) const {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << ToJson() << "\n";
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return IoError(path + ": cannot write the link faults: " + ErrnoMessage(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return IoError(path + ": cannot replace the link faults: " + ErrnoMessage(err));
  }
  return Status::Ok();
}

Result<LinkFaultBook> LinkFaultBook::FromJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("link faults: not a JSON object");
  auto list = j.find("faults");
  if (list == j.end() || !list->is_array()) return InvalidArgument("link faults: \"faults\" must be an array");
  if (list->size() > kMaxFaults) {
    return InvalidArgument("link faults: " + std::to_string(list->size()) + " entries, at most " +
                           std::to_string(kMaxFaults));
  }
  LinkFaultBook book;
  for (size_t i = 0; i < list->size(); ++i) {
    const auto& e = (*list)[i];
    const std::string where = "link faults: faults[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgument(where + ": must be an object");
    LinkFault f;
    auto hosts = e.find("hosts");
    if (hosts == e.end() || !hosts->is_array() || hosts->size() != 2 || !(*hosts)[0].is_string() ||
        !(*hosts)[1].is_string()) {
      return InvalidArgument(where + ".hosts: must be two host names");
    }
    f.a = (*hosts)[0].get<std::string>();
    f.b = (*hosts)[1].get<std::string>();
    if (f.a.empty() || f.b.empty() || f.a == f.b) return InvalidArgument(where + ".hosts: must name two different hosts");
    auto kind = e.find("kind");
    if (kind == e.end() || !kind->is_string() || (*kind != "drop" && *kind != "slow")) {
      return InvalidArgument(where + ".kind: must be \"drop\" or \"slow\"");
    }
    f.kind = *kind == "drop" ? LinkFaultKind::kDrop : LinkFaultKind::kSlow;
    for (const char* key : {"from_ms", "until_ms"}) {
      auto it = e.find(key);
      if (it == e.end() || !it->is_number_integer()) return InvalidArgument(where + "." + key + ": must be an integer");
      (std::string(key) == "from_ms" ? f.from_ms : f.until_ms) = it->get<int64_t>();
    }
    if (f.until_ms <= f.from_ms) return InvalidArgument(where + ": until_ms must be after from_ms");
    if (f.kind == LinkFaultKind::kSlow) {
      auto factor = e.find("factor");
      if (factor == e.end() || !factor->is_number()) return InvalidArgument(where + ".factor: must be a number");
      f.factor = factor->get<double>();
      if (!std::isfinite(f.factor) || f.factor < 2 || f.factor > 1000) {
        return InvalidArgument(where + ".factor: must be from 2 to 1000");
      }
      if (auto delay = e.find("delay_ms"); delay != e.end()) {
        if (!delay->is_number()) return InvalidArgument(where + ".delay_ms: must be a number");
        f.delay_ms = delay->get<double>();
        if (!std::isfinite(f.delay_ms) || f.delay_ms < 0 || f.delay_ms > 10000) {
          return InvalidArgument(where + ".delay_ms: must be from 0 to 10000");
        }
      }
    }
    book.faults.push_back(std::move(f));
  }
  return book;
}

bool LinkFaultWatcher::Poll(int64_t now_ms) {
  if (now_ms < next_check_ms_) return false;
  next_check_ms_ = now_ms + interval_ms_;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (mtime_ns_ == -1 && size_ == -1) return false;  // still absent
    mtime_ns_ = -1;
    size_ = -1;
    const bool had = !book_.faults.empty();
    book_ = {};
    return had;
  }
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (mtime == mtime_ns_ && st.st_size == size_) return false;
  mtime_ns_ = mtime;
  size_ = st.st_size;
  Result<std::string> text = ReadFileText(path_, kMaxFileBytes);
  Result<LinkFaultBook> book = text.ok() ? LinkFaultBook::FromJson(*text) : Result<LinkFaultBook>(text.status());
  if (!book.ok()) {
    error_ = path_ + ": " + book.status().message();
    return false;
  }
  error_.clear();
  const bool changed = book->faults != book_.faults;
  book_ = std::move(book).value();
  return changed;
}

}  // namespace tenax::net
