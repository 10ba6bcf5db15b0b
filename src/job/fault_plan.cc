#include "tenax/job/fault_plan.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <random>
#include <sstream>

#include "tenax/core/number_text.h"

namespace tenax {
namespace {

constexpr const char* kEntryKeys =
    "action, worker, server, storage, wipe, coordinator, workers, hosts, host, seconds, factor, delay_ms, at_seconds, "
    "at_step, grace_seconds, delay_seconds";
constexpr double kMaxLinkFaultSeconds = 3600;
constexpr const char* kRandomKeys =
    "mean_lifetime_seconds, seed, action, restart_delay_seconds, max_faults, grace_seconds";

std::string Num(double v) { return NumberText(v); }

// Marks every value under `node` (at dotted `path`) as read, mirroring how
// ConfigReader::Finish enumerates a document's keys.
void MarkRead(ConfigReader& reader, const toml::node& node, const std::string& path) {
  if (const auto* t = node.as_table(); t && !t->empty()) {
    for (const auto& [k, child] : *t) MarkRead(reader, child, path + "." + std::string(k.str()));
  } else {
    reader.Node(path);
  }
}

// Reads the keys of one table of the plan: an entry "faults[2]" or the
// random table "faults.random". Errors are one line "<where>: <name>.<key>:
// <what>", where <where> is the key's file:line (or its --set).
class TableReader {
 public:
  TableReader(const ConfigDoc& doc, const toml::table& table, std::string name, std::string dotted)
      : doc_(doc), table_(table), name_(std::move(name)), dotted_(std::move(dotted)) {}

  const std::string& name() const { return name_; }
  bool has(std::string_view key) const { return table_.contains(key); }

  // "<where>: <name>: <message>" for the table as a whole.
  Status Fail(const std::string& message) const {
    return InvalidArgument(WhereOf(&table_, dotted_) + ": " + name_ + ": " + message);
  }
  // "<where>: <name>.<key>: <message>".
  Status Fail(std::string_view key, const std::string& message) const {
    const toml::node* n = table_.get(key);
    return InvalidArgument(WhereOf(n, dotted_ + "." + std::string(key)) + ": " + name_ + "." + std::string(key) + ": " +
                           message);
  }

  // `lifted` is a key taken out of the table before (the random table TOML
  // puts into a [[faults]] entry).
  Status CheckKnown(const std::vector<std::string_view>& known, const char* list, std::string_view lifted = {}) const {
    for (const auto& [k, node] : table_) {
      if (k.str() == lifted) continue;
      if (std::find(known.begin(), known.end(), k.str()) == known.end()) {
        return Fail(k.str(), std::string("unknown key (expected one of ") + list + ")");
      }
    }
    return Status::Ok();
  }

  Result<std::optional<std::string>> String(std::string_view key) const {
    const toml::node* n = table_.get(key);
    if (!n) return std::optional<std::string>();
    if (!n->is_string()) return TypeError(key, "a string", *n);
    return std::optional<std::string>(*n->value<std::string>());
  }
  Result<std::optional<int64_t>> Int(std::string_view key) const {
    const toml::node* n = table_.get(key);
    if (!n) return std::optional<int64_t>();
    if (!n->is_integer()) return TypeError(key, "an integer", *n);
    return std::optional<int64_t>(*n->value<int64_t>());
  }
  Result<std::optional<bool>> Bool(std::string_view key) const {
    const toml::node* n = table_.get(key);
    if (!n) return std::optional<bool>();
    if (!n->is_boolean()) return TypeError(key, "true or false", *n);
    return std::optional<bool>(*n->value<bool>());
  }
  Result<std::optional<double>> Real(std::string_view key) const {
    const toml::node* n = table_.get(key);
    if (!n) return std::optional<double>();
    if (n->is_integer()) return std::optional<double>(static_cast<double>(*n->value<int64_t>()));
    if (!n->is_floating_point()) return TypeError(key, "a number", *n);
    const double v = *n->value<double>();
    if (!std::isfinite(v)) return Fail(key, "must be a finite number, got " + Num(v));
    return std::optional<double>(v);
  }
  // A number of seconds in 0..kMaxFaultSeconds.
  Result<std::optional<double>> Seconds(std::string_view key) const {
    TENAX_ASSIGN_OR_RETURN(std::optional<double> v, Real(key));
    if (v && *v < 0) return Fail(key, "must be >= 0, got " + Num(*v));
    if (v && *v > kMaxFaultSeconds) {
      return Fail(key, Num(*v) + " is beyond 7 days (" + Num(kMaxFaultSeconds) + " s)");
    }
    return v;
  }
  // An array of exactly `n` strings (or integers).
  Result<std::optional<std::vector<std::string>>> Strings(std::string_view key, size_t n) const {
    const toml::node* node = table_.get(key);
    if (!node) return std::optional<std::vector<std::string>>();
    const toml::array* a = node->as_array();
    std::vector<std::string> v;
    for (size_t i = 0; a && i < a->size(); ++i) {
      if (!(*a)[i].is_string()) break;
      v.push_back(*(*a)[i].value<std::string>());
    }
    if (!a || v.size() != a->size() || v.size() != n) {
      return Fail(key, "must be an array of " + std::to_string(n) + " host names, e.g. [\"a1\", \"b1\"]");
    }
    return std::optional<std::vector<std::string>>(std::move(v));
  }
  Result<std::optional<std::vector<int64_t>>> Ints(std::string_view key, size_t n) const {
    const toml::node* node = table_.get(key);
    if (!node) return std::optional<std::vector<int64_t>>();
    const toml::array* a = node->as_array();
    std::vector<int64_t> v;
    for (size_t i = 0; a && i < a->size(); ++i) {
      if (!(*a)[i].is_integer()) break;
      v.push_back(*(*a)[i].value<int64_t>());
    }
    if (!a || v.size() != a->size() || v.size() != n) {
      return Fail(key, "must be an array of " + std::to_string(n) + " worker indices, e.g. [0, 2]");
    }
    return std::optional<std::vector<int64_t>>(std::move(v));
  }
  Result<std::optional<FaultAction>> Action(const std::vector<FaultAction>& allowed) const {
    TENAX_ASSIGN_OR_RETURN(std::optional<std::string> s, String("action"));
    if (!s) return std::optional<FaultAction>();
    std::string list;
    for (FaultAction a : allowed) {
      if (*s == FaultActionName(a)) return std::optional<FaultAction>(a);
      list += (list.empty() ? "" : ", ") + std::string(FaultActionName(a));
    }
    return Fail("action", "must be one of " + list + ", got '" + *s + "'");
  }

 private:
  Status TypeError(std::string_view key, const char* expected, const toml::node& n) const {
    return Fail(key, std::string("must be ") + expected + ", got " + std::string(TomlTypeName(n.type())));
  }
  // The key's origin recorded by the document (file:line or --set), else
  // the node's own line (values inside arrays), else where `faults` is.
  std::string WhereOf(const toml::node* n, const std::string& dotted) const {
    const std::string plain = doc_.source_name().empty() ? "config" : doc_.source_name();
    if (std::string w = doc_.Where(dotted); w != plain) return w;
    if (n && n->source().begin.line > 0) return plain + ":" + std::to_string(n->source().begin.line);
    return doc_.Where("faults");
  }

  const ConfigDoc& doc_;
  const toml::table& table_;
  std::string name_;
  std::string dotted_;  // its path in the document's origins ("" inside arrays)
};

const std::vector<std::string_view> kEntryKeyList = {
    "action", "worker", "server",     "storage", "wipe",          "coordinator",  "workers", "hosts",
    "host",   "seconds", "factor",    "delay_ms", "at_seconds",   "at_step",       "grace_seconds", "delay_seconds"};
const std::vector<std::string_view> kRandomKeyList = {"mean_lifetime_seconds", "seed",       "action",
                                                      "restart_delay_seconds", "max_faults", "grace_seconds"};

Status NeedsElastic(const TableReader& t, FaultAction action) {
  return t.Fail(std::string("action \"") + FaultActionName(action) +
                "\" needs cluster.elastic = true (without it only kill, preempt and stop apply: they test that "
                "the job fails cleanly)");
}

// When the entry fires: exactly one of at_seconds and at_step, and its delay.
Status ParseTrigger(const TableReader& t, const FaultPlanContext& ctx, FaultSpec& f) {
  TENAX_ASSIGN_OR_RETURN(f.at_seconds, t.Seconds("at_seconds"));
  TENAX_ASSIGN_OR_RETURN(f.at_step, t.Int("at_step"));
  if (f.at_seconds.has_value() == f.at_step.has_value()) return t.Fail("set exactly one of at_seconds and at_step");
  if (f.at_step) {
    if (*f.at_step < 1) return t.Fail("at_step", "must be >= 1, got " + std::to_string(*f.at_step));
    const std::optional<int64_t> total = ctx.total_steps ? ctx.total_steps() : std::nullopt;
    if (total && *f.at_step > *total) {
      return t.Fail("at_step " + std::to_string(*f.at_step) + " is beyond the job's " + std::to_string(*total) +
                    " steps");
    }
  }
  TENAX_ASSIGN_OR_RETURN(std::optional<double> delay, t.Seconds("delay_seconds"));
  if (delay) f.delay_seconds = *delay;
  return Status::Ok();
}

// drop_link, slow_link, partition and slow_host: between the hosts of [topology].
Result<FaultSpec> ParseLinkFault(const TableReader& t, const FaultPlanContext& ctx, FaultSpec f) {
  const std::string name = FaultActionName(f.action);
  if (ctx.hosts.empty()) {
    return t.Fail("action \"" + name + "\" needs an emulated topology ([topology] hosts): link faults live between "
                  "its hosts");
  }
  for (const char* key : {"server", "storage", "wipe", "coordinator", "grace_seconds"}) {
    if (t.has(key)) return t.Fail(key, "does not apply to action \"" + name + "\"");
  }
  auto check_host = [&](std::string_view key, const std::string& host) -> Status {
    if (std::find(ctx.hosts.begin(), ctx.hosts.end(), host) != ctx.hosts.end()) return Status::Ok();
    std::string list;
    for (const auto& h : ctx.hosts) list += (list.empty() ? "" : ", ") + h;
    return t.Fail(key, "'" + host + "' is not a host of [topology] (" + list + ")");
  };
  auto check_worker = [&](std::string_view key, int64_t w) -> Status {
    if (w >= 0 && w < ctx.workers) return Status::Ok();
    return t.Fail(key, std::to_string(w) + " is not a worker (cluster.workers = " + std::to_string(ctx.workers) + ")");
  };
  // partition and slow_host name one host (or a worker's).
  const bool one_host = f.action == FaultAction::kPartition || f.action == FaultAction::kSlowHost;
  const char* which_host = f.action == FaultAction::kPartition ? "the host cut off from its zone" : "the host whose links slow down";
  TENAX_ASSIGN_OR_RETURN(std::optional<double> factor, t.Real("factor"));
  const bool slows = f.action == FaultAction::kSlowLink || f.action == FaultAction::kSlowHost;
  if (factor && !slows) return t.Fail("factor", "only applies to actions \"slow_link\" and \"slow_host\"");
  if (factor && (*factor < 2 || *factor > 1000)) return t.Fail("factor", "must be from 2 to 1000, got " + Num(*factor));
  if (factor) f.factor = *factor;
  TENAX_ASSIGN_OR_RETURN(std::optional<double> delay_ms, t.Real("delay_ms"));
  if (delay_ms && !slows) return t.Fail("delay_ms", "only applies to actions \"slow_link\" and \"slow_host\"");
  if (delay_ms && (*delay_ms < 0 || *delay_ms > 10000)) {
    return t.Fail("delay_ms", "must be from 0 to 10000 (ms added to each way), got " + Num(*delay_ms));
  }
  if (delay_ms) f.delay_ms = *delay_ms;
  if (one_host) {
    for (const char* key : {"workers", "hosts"}) {
      if (t.has(key)) {
        return t.Fail(key, "does not apply to action \"" + name + "\" (host = \"a1\" or worker = N: " + which_host + ")");
      }
    }
    TENAX_ASSIGN_OR_RETURN(std::optional<std::string> host, t.String("host"));
    TENAX_ASSIGN_OR_RETURN(std::optional<int64_t> worker, t.Int("worker"));
    if (host.has_value() == worker.has_value()) return t.Fail("set one of host and worker (" + std::string(which_host) + ")");
    if (host) {
      TENAX_RETURN_IF_ERROR(check_host("host", *host));
      f.hosts = {*host};
    } else {
      TENAX_RETURN_IF_ERROR(check_worker("worker", *worker));
      f.worker = *worker;
    }
  } else {
    for (const char* key : {"host", "worker"}) {
      if (t.has(key)) {
        return t.Fail(key, "does not apply to action \"" + name + "\" (hosts = [\"a1\", \"b1\"] or workers = [0, 2]: "
                           "the two ends of the link)");
      }
    }
    TENAX_ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> hosts, t.Strings("hosts", 2));
    TENAX_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> workers, t.Ints("workers", 2));
    if (hosts.has_value() == workers.has_value()) {
      return t.Fail("set one of hosts and workers (the two ends of the link)");
    }
    if (hosts) {
      for (const auto& h : *hosts) TENAX_RETURN_IF_ERROR(check_host("hosts", h));
      if ((*hosts)[0] == (*hosts)[1]) return t.Fail("hosts", "names one host twice (a link has two ends)");
      f.hosts = *hosts;
    } else {
      for (int64_t w : *workers) TENAX_RETURN_IF_ERROR(check_worker("workers", w));
      if ((*workers)[0] == (*workers)[1]) return t.Fail("workers", "names one worker twice (a link has two ends)");
      f.link_workers = *workers;
    }
  }
  TENAX_ASSIGN_OR_RETURN(std::optional<double> seconds, t.Seconds("seconds"));
  if (!seconds) return t.Fail("seconds is required (how long the link fault lasts)");
  if (*seconds <= 0 || *seconds > kMaxLinkFaultSeconds) {
    return t.Fail("seconds", "must be > 0 and at most " + Num(kMaxLinkFaultSeconds) + ", got " + Num(*seconds));
  }
  f.seconds = *seconds;
  TENAX_RETURN_IF_ERROR(ParseTrigger(t, ctx, f));
  return f;
}

Result<FaultSpec> ParseEntry(const TableReader& t, const FaultPlanContext& ctx) {
  TENAX_RETURN_IF_ERROR(t.CheckKnown(kEntryKeyList, kEntryKeys, "random"));
  FaultSpec f;
  TENAX_ASSIGN_OR_RETURN(std::optional<FaultAction> action,
                         t.Action({FaultAction::kKill, FaultAction::kPreempt, FaultAction::kStop, FaultAction::kCont,
                                   FaultAction::kRestart, FaultAction::kDropLink, FaultAction::kSlowLink,
                                   FaultAction::kPartition, FaultAction::kSlowHost}));
  if (!action) {
    return t.Fail(
        "action is required (kill, preempt, stop, cont, restart, drop_link, slow_link, partition or slow_host)");
  }
  f.action = *action;
  if (IsLinkFault(f.action)) return ParseLinkFault(t, ctx, f);
  for (const char* key : {"workers", "hosts", "host", "seconds", "factor", "delay_ms"}) {
    if (t.has(key)) return t.Fail(key, "only applies to link faults (drop_link, slow_link, partition, slow_host)");
  }
  TENAX_ASSIGN_OR_RETURN(std::optional<bool> coordinator, t.Bool("coordinator"));
  if (coordinator && !*coordinator) return t.Fail("coordinator", "is true or absent (false names no target)");
  // The coordinator restarted on its state file resumes the job in every
  // mode, elastic or not: restart needs no elasticity there.
  if (!coordinator && !ctx.elastic && (f.action == FaultAction::kRestart || (f.action == FaultAction::kCont && !ctx.stops_tolerated))) {
    return NeedsElastic(t, f.action);
  }

  TENAX_ASSIGN_OR_RETURN(std::optional<int64_t> worker, t.Int("worker"));
  TENAX_ASSIGN_OR_RETURN(std::optional<int64_t> server, t.Int("server"));
  TENAX_ASSIGN_OR_RETURN(std::optional<int64_t> storage, t.Int("storage"));
  TENAX_ASSIGN_OR_RETURN(std::optional<bool> wipe, t.Bool("wipe"));
  if (wipe && !storage) return t.Fail("wipe", "only applies to a storage node (storage = N)");
  if (coordinator) {
    if (worker || server || storage) return t.Fail("set one of worker, server, storage and coordinator");
    if (f.action != FaultAction::kKill && f.action != FaultAction::kRestart) {
      return t.Fail(std::string("action \"") + FaultActionName(f.action) +
                    "\" does not apply to the coordinator (kill, then restart to start it again on its state file)");
    }
    f.coordinator = true;
  } else if (storage) {
    if (ctx.storage_nodes <= 0) {
      return t.Fail("storage", "needs a store that tenax run builds ([storage] nodes = N, data.format = \"store\")");
    }
    if (worker || server) return t.Fail("set one of worker, server and storage");
    if (f.action != FaultAction::kKill) {
      return t.Fail(std::string("action \"") + FaultActionName(f.action) +
                    "\" does not apply to a storage node (kill, with wipe = true for a dead disk)");
    }
    if (*storage < 0 || *storage >= ctx.storage_nodes) {
      return t.Fail("storage", std::to_string(*storage) + " is not a data node (storage.nodes = " +
                                   std::to_string(ctx.storage_nodes) + ")");
    }
    f.storage = *storage;
    f.wipe = wipe.value_or(false);
  } else if (server) {
    if (ctx.servers <= 0) return t.Fail("server", "only applies to mode \"async\" (the job has no parameter servers)");
    if (worker) return t.Fail("set worker or server, not both");
    if (*server < 0 || *server >= ctx.servers) {
      return t.Fail("server", std::to_string(*server) + " is not a server (async.servers = " +
                                  std::to_string(ctx.servers) + ")");
    }
    f.server = *server;
  } else if (f.action == FaultAction::kRestart) {
    if (worker) {
      return t.Fail("worker", "does not apply to action \"restart\" (the new worker gets its id from the coordinator)");
    }
  } else {
    if (!worker) {
      return t.Fail(std::string("action \"") + FaultActionName(f.action) + "\" needs worker (0.." +
                    std::to_string(ctx.workers - 1) + ")" + (ctx.servers > 0 ? " or server" : ""));
    }
    if (*worker < 0 || *worker >= ctx.workers) {
      return t.Fail("worker", std::to_string(*worker) +
                                  " is not a worker (cluster.workers = " + std::to_string(ctx.workers) + ")");
    }
    f.worker = *worker;
  }

  TENAX_RETURN_IF_ERROR(ParseTrigger(t, ctx, f));
  TENAX_ASSIGN_OR_RETURN(std::optional<double> grace, t.Seconds("grace_seconds"));
  if (grace && f.action != FaultAction::kPreempt) return t.Fail("grace_seconds", "only applies to action \"preempt\"");
  if (grace) f.grace_seconds = *grace;
  return f;
}

Result<RandomFaults> ParseRandom(const TableReader& t, const FaultPlanContext& ctx) {
  TENAX_RETURN_IF_ERROR(t.CheckKnown(kRandomKeyList, kRandomKeys));
  RandomFaults r;
  TENAX_ASSIGN_OR_RETURN(std::optional<double> mean, t.Seconds("mean_lifetime_seconds"));
  if (!mean) return t.Fail("mean_lifetime_seconds is required (the mean of each worker's exponential lifetime)");
  if (*mean <= 0) return t.Fail("mean_lifetime_seconds", "must be > 0, got " + Num(*mean));
  r.mean_lifetime_seconds = *mean;
  TENAX_ASSIGN_OR_RETURN(std::optional<int64_t> seed, t.Int("seed"));
  if (seed && *seed < 0) return t.Fail("seed", "must be >= 0, got " + std::to_string(*seed));
  if (seed) r.seed = *seed;
  TENAX_ASSIGN_OR_RETURN(std::optional<FaultAction> action,
                         t.Action({FaultAction::kKill, FaultAction::kPreempt, FaultAction::kStop}));
  if (action) r.action = *action;
  TENAX_ASSIGN_OR_RETURN(r.restart_delay_seconds, t.Seconds("restart_delay_seconds"));
  if (r.restart_delay_seconds && !ctx.elastic) {
    return t.Fail("restart_delay_seconds", "needs cluster.elastic = true (a new worker joins a running elastic job)");
  }
  TENAX_ASSIGN_OR_RETURN(std::optional<int64_t> max_faults, t.Int("max_faults"));
  if (max_faults && (*max_faults < 1 || *max_faults > 1024)) {
    return t.Fail("max_faults", "must be between 1 and 1024, got " + std::to_string(*max_faults));
  }
  if (max_faults) r.max_faults = *max_faults;
  TENAX_ASSIGN_OR_RETURN(std::optional<double> grace, t.Seconds("grace_seconds"));
  if (grace && r.action != FaultAction::kPreempt) return t.Fail("grace_seconds", "only applies to action \"preempt\"");
  if (grace) r.grace_seconds = *grace;
  return r;
}

std::string Where(const ConfigDoc& doc, const toml::node& node) {
  if (node.source().begin.line > 0) return doc.source_name() + ":" + std::to_string(node.source().begin.line);
  return doc.Where("faults");
}

}  // namespace

const char* FaultActionName(FaultAction action) {
  switch (action) {
    case FaultAction::kKill:
      return "kill";
    case FaultAction::kPreempt:
      return "preempt";
    case FaultAction::kStop:
      return "stop";
    case FaultAction::kCont:
      return "cont";
    case FaultAction::kRestart:
      return "restart";
    case FaultAction::kDropLink:
      return "drop_link";
    case FaultAction::kSlowLink:
      return "slow_link";
    case FaultAction::kPartition:
      return "partition";
    case FaultAction::kSlowHost:
      return "slow_host";
  }
  return "unknown";
}

bool IsLinkFault(FaultAction action) {
  return action == FaultAction::kDropLink || action == FaultAction::kSlowLink || action == FaultAction::kPartition ||
         action == FaultAction::kSlowHost;
}

std::string FaultSpec::Describe() const {
  std::string s = FaultActionName(action);
  if (IsLinkFault(action)) {
    if (!hosts.empty()) {
      s += hosts.size() == 2 ? " hosts " + hosts[0] + "-" + hosts[1] : " host " + hosts[0];
    } else if (!link_workers.empty()) {
      s += " workers " + std::to_string(link_workers[0]) + "-" + std::to_string(link_workers[1]);
    } else {
      s += " worker " + std::to_string(worker) + "'s host";
    }
    s += " for " + Num(seconds) + " s";
    if (action == FaultAction::kSlowLink || action == FaultAction::kSlowHost) {
      s += " (" + Num(factor) + "x slower" + (delay_ms > 0 ? ", +" + Num(delay_ms) + " ms" : "") + ")";
    }
  } else if (coordinator) {
    s += " coordinator";
  } else if (storage >= 0) {
    s += " storage node-" + std::to_string(storage) + (wipe ? " (wiped)" : "");
  } else if (server >= 0) {
    s += " server " + std::to_string(server);
  } else if (action != FaultAction::kRestart) {
    s += " worker " + std::to_string(worker);
  }
  s += at_step ? " at step " + std::to_string(*at_step) : " at " + Num(at_seconds.value_or(0)) + " s";
  if (delay_seconds > 0) s += " (+" + Num(delay_seconds) + " s)";
  return s;
}

std::vector<RandomFaultEvent> ScheduleRandomFaults(const RandomFaults& random, int64_t workers) {
  std::mt19937_64 rng(static_cast<uint64_t>(random.seed));
  auto lifetime = [&] {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
    return -random.mean_lifetime_seconds * std::log1p(-u);
  };
  struct Death {
    double at;
    int64_t slot;
    bool operator>(const Death& o) const { return at != o.at ? at > o.at : slot > o.slot; }
  };
  std::priority_queue<Death, std::vector<Death>, std::greater<>> deaths;
  for (int64_t w = 0; w < workers; ++w) deaths.push({lifetime(), w});
  std::vector<RandomFaultEvent> events;
  int64_t next_slot = workers, faults = 0;
  while (faults < random.max_faults && !deaths.empty()) {
    const Death d = deaths.top();
    deaths.pop();
    if (d.at > kMaxFaultSeconds) break;  // no job runs that long
    events.push_back({d.at, random.action, d.slot});
    ++faults;
    if (random.restart_delay_seconds) {
      const double start = d.at + *random.restart_delay_seconds;
      events.push_back({start, FaultAction::kRestart, next_slot});
      deaths.push({start + lifetime(), next_slot});
      ++next_slot;
    }
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const RandomFaultEvent& a, const RandomFaultEvent& b) { return a.at_seconds < b.at_seconds; });
  return events;
}

Result<FaultPlan> ParseFaultPlan(const ConfigDoc& doc, ConfigReader& reader, const FaultPlanContext& context) {
  FaultPlan plan;
  const toml::node* faults = reader.Node("faults");
  if (!faults) return plan;
  MarkRead(reader, *faults, "faults");
  if (!context.sync) return InvalidArgument(Where(doc, *faults) + ": faults: only apply to modes \"sync\" and \"async\"");

  // The random table: [faults.random] alone makes `faults` a table; after
  // [[faults]] entries TOML puts it inside the last entry.
  const toml::table* random = nullptr;
  std::string random_dotted;
  std::vector<std::pair<size_t, const toml::table*>> entries;
  if (const auto* t = faults->as_table()) {
    for (const auto& [k, node] : *t) {
      if (k.str() != "random") {
        return InvalidArgument(doc.Where("faults." + std::string(k.str())) + ": faults." + std::string(k.str()) +
                               ": unknown key (the plan is [[faults]] entries and a [faults.random] table)");
      }
    }
    random = (*t)["random"].as_table();
    random_dotted = "faults.random";
    if (!random) {
      return InvalidArgument(doc.Where("faults.random") + ": faults.random: must be a table ([faults.random])");
    }
  } else if (const auto* a = faults->as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string name = "faults[" + std::to_string(i) + "]";
      const toml::table* e = (*a)[i].as_table();
      if (!e) return InvalidArgument(Where(doc, (*a)[i]) + ": " + name + ": must be a table (a [[faults]] entry)");
      if (const toml::node* r = e->get("random")) {
        if (!r->is_table())
          return InvalidArgument(Where(doc, *r) + ": faults.random: must be a table ([faults.random])");
        if (random) return InvalidArgument(Where(doc, *r) + ": faults.random: given twice");
        random = r->as_table();
        if (e->size() == 1) continue;  // [[faults]] directly followed by [faults.random]: no fault of its own
      }
      entries.emplace_back(i, e);
    }
  } else {
    return InvalidArgument(Where(doc, *faults) +
                           ": faults: must be [[faults]] entries or a [faults.random] table, got " +
                           std::string(TomlTypeName(faults->type())));
  }

  for (const auto& [i, e] : entries) {
    TableReader t(doc, *e, "faults[" + std::to_string(i) + "]", "");
    TENAX_ASSIGN_OR_RETURN(FaultSpec f, ParseEntry(t, context));
    f.index = static_cast<int64_t>(i);
    plan.faults.push_back(f);
  }
  if (random) {
    TableReader t(doc, *random, "faults.random", random_dotted);
    TENAX_ASSIGN_OR_RETURN(RandomFaults r, ParseRandom(t, context));
    plan.random = r;
  }
  return plan;
}

}  // namespace tenax
