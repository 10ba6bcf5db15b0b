#include "tenax/store/recovery_service.h"

#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/store/catalog.h"
#include "tenax/store/recovery_json.h"
#include "tenax/store/storage_codec.h"
#include "tenax/store/store_client.h"

namespace tenax::store {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Lost chunks listed per dataset in a reply (the rest are counted).
constexpr size_t kMaxReportedLosses = 1000;
// How often an idle service drives its connections to the data nodes.
constexpr auto kKeepAliveInterval = 100ms;
// A claim older than this belongs to an owner that died (catalog.h).
constexpr int64_t kClaimStaleSeconds = 3600;

// A claim's owner names "pid P on HOST" (the service's and the loaders'
// claims both do): true when HOST is this machine and no process P runs.
bool DeadOnThisHost(const std::string& owner, const std::string& host) {
  const size_t at = owner.find("pid ");
  if (at == std::string::npos) return false;
  size_t end = at + 4;
  while (end < owner.size() && std::isdigit(static_cast<unsigned char>(owner[end]))) ++end;
  if (end == at + 4 || owner.compare(end, 4, " on ") != 0) return false;
  std::string rest = owner.substr(end + 4);
  if (!rest.empty() && rest.back() == ')') rest.pop_back();
  if (rest != host) return false;
  const long pid = std::strtol(owner.c_str() + at + 4, nullptr, 10);
  if (pid <= 0 || pid > 1 << 22) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

RecoveryRequest FromWire(const wire::RecoverRequest& w) {
  RecoveryRequest r;
  r.dataset = w.dataset();
  r.options.policy = w.policy();
  r.options.rebuild_later = w.rebuild_later();
  r.options.prm.min_available = w.min_available();
  r.options.prm.class_tolerance = w.class_tolerance();
  r.options.background_bytes_per_second = w.background_bytes_per_second();
  for (uint32_t c : w.important_classes()) r.important_classes.push_back(static_cast<int>(c));
  return r;
}

// Two requests with the same key would run the same recovery.
std::string KeyOf(wire::RecoverRequest w) {
  w.set_request_id(0);
  return w.SerializeAsString();
}

struct Waiter {
  net::PeerId peer = 0;
  uint64_t request_id = 0;
  Clock::time_point received;
};

// One recovery to run, and everyone waiting for it.
struct Job {
  std::string key;
  RecoveryRequest request;
  std::vector<Waiter> waiters;  // the first started it
  uint64_t id = 0;              // set when it starts
  Clock::time_point started;
  // The outcome, set by the recovery thread.
  Status status;
  nlohmann::json report;
  double seconds = 0;
};

class RecoveryService {
 public:
  RecoveryService(const RecoveryServiceOptions& o, std::unique_ptr<net::Node> node, std::unique_ptr<StoreCatalog> catalog)
      : o_(o), node_(std::move(node)), catalog_(std::move(catalog)) {}

  ~RecoveryService() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Starts the recovery thread, which opens the store (and connects every
  // live node) before it returns.
  Result<size_t> StartRecoveryThread() {
    std::promise<Result<size_t>> opened;
    auto ready = opened.get_future();
    thread_ = std::thread([this, &opened] { RecoveryThread(opened); });
    return ready.get();
  }

  Status Serve() {
    constexpr int kSpinPolls = 2000;
    constexpr auto kIdleNap = 200us;  // as the data nodes: an idle service leaves the cores to training
    int idle_polls = 0;
    while (!(o_.stop && o_.stop())) {
      node_->Progress();
      while (node_->Accept(Deadline::At(Clock::now())).ok()) {
      }
      bool busy = false;
      auto msg = node_->ReceiveControl(Deadline::At(Clock::now()));
      if (msg.ok()) {
        Handle(*msg);
        busy = true;
      }
      busy = AnswerFinished() || busy;
      if (busy) {
        idle_polls = 0;
      } else if (++idle_polls > kSpinPolls) {
        std::this_thread::sleep_for(kIdleNap);
      }
    }
    // A recovery under way ends with its manifest stored; its requesters
    // are answered if they are still there.
    {
      std::unique_lock lock(mu_);
      waiting_.clear();
      stopping_ = true;
      cv_.notify_all();
      done_cv_.wait(lock, [this] { return !running_; });
    }
    AnswerFinished();
    return Status::Ok();
  }

  RecoveryServiceReport report() {
    std::lock_guard lock(mu_);
    return stats_;
  }

 private:
  std::string Label(net::PeerId peer) const {
    auto info = node_->Info(peer);
    return info.ok() ? info->name + " (" + info->address + ")" : "peer " + std::to_string(peer);
  }

  void Handle(const net::ControlMessage& m) {
    const std::string label = Label(m.from);
    if (m.kind != kRecoverRequestKind) {
      spdlog::warn("{}: dropping {}: a message of kind {}", o_.name, label, m.kind);
      node_->Disconnect(m.from, Deadline::After(500ms));
      return;
    }
    {
      std::lock_guard lock(mu_);
      ++stats_.requests;
    }
    auto req = DecodeRecoverRequest(m.payload, label);
    if (!req.ok()) {
      // The request id cannot be trusted; answer id 0 so the client sees why.
      return Refuse({m.from, 0, Clock::now()}, req.status());
    }
    const Waiter w{m.from, req->request_id(), Clock::now()};
    if (Status known = CheckDataset(req->dataset()); !known.ok()) return Refuse(w, known);
    const std::string key = KeyOf(*req);
    if (Status queued = Enqueue(key, *req, w, label); !queued.ok()) Refuse(w, queued);
  }

  // Joins the running or a waiting recovery with the same key, or queues a
  // new one; ResourceExhausted when the queue is full.
  Status Enqueue(const std::string& key, const wire::RecoverRequest& req, const Waiter& w, const std::string& label) {
    std::lock_guard lock(mu_);
    if (running_ && running_->key == key) {
      running_->waiters.push_back(w);
      spdlog::info("{}: {} joins the running recovery {} of {}", o_.name, label, running_->id, Name(req.dataset()));
      return Status::Ok();
    }
    for (auto& job : waiting_) {
      if (job->key == key) {
        job->waiters.push_back(w);
        return Status::Ok();
      }
    }
    if (waiting_.size() >= o_.max_waiting) {
      return Unavailable(o_.name + ": " + std::to_string(waiting_.size()) +
                               " recoveries already wait behind the running one; ask again when it ends");
    }
    auto job = std::make_shared<Job>();
    job->key = key;
    job->request = FromWire(req);
    job->waiters.push_back(w);
    waiting_.push_back(std::move(job));
    spdlog::info("{}: {} asks for a {} recovery of {}{}", o_.name, label, req.policy(), Name(req.dataset()),
                 running_ ? " (queued behind the running one)" : "");
    cv_.notify_all();
    return Status::Ok();
  }

  static std::string Name(const std::string& dataset) { return dataset.empty() ? "every dataset" : dataset; }

  Status CheckDataset(const std::string& dataset) {
    if (dataset.empty()) return Status::Ok();
    TENAX_ASSIGN_OR_RETURN(auto names, catalog_->Datasets());
    for (const auto& n : names) {
      if (n == dataset) return Status::Ok();
    }
    std::string has;
    for (const auto& n : names) has += (has.empty() ? "" : ", ") + n;
    return NotFound("no dataset '" + dataset + "' in the store catalog " + catalog_->path() +
                    " (it has: " + (has.empty() ? "none" : has) + ")");
  }

  void Refuse(const Waiter& w, const Status& why) {
    {
      std::lock_guard lock(mu_);
      ++stats_.refused;
    }
    spdlog::warn("{}: refusing a request of {}: {}", o_.name, Label(w.peer), why.message());
    wire::RecoverReply r;
    r.set_request_id(w.request_id);
    r.set_code(static_cast<uint32_t>(why.code()));
    r.set_error(why.message().substr(0, 4000));
    Send(w.peer, r);
  }

  void Send(net::PeerId peer, const wire::RecoverReply& r) {
    if (Status st = node_->SendControl(peer, kRecoverReplyKind, r.SerializeAsString(), Deadline::After(2s)); !st.ok()) {
      spdlog::warn("{}: cannot answer {}: {}", o_.name, Label(peer), st.message());
    }
  }

  // Answers the requesters of recoveries that ended; true if any did.
  bool AnswerFinished() {
    std::vector<std::shared_ptr<Job>> finished;
    {
      std::lock_guard lock(mu_);
      finished.swap(finished_);
    }
    for (const auto& job : finished) {
      for (size_t i = 0; i < job->waiters.size(); ++i) {
        const Waiter& w = job->waiters[i];
        wire::RecoverReply r;
        r.set_request_id(w.request_id);
        r.set_recovery_id(job->id);
        r.set_joined(i > 0);
        r.set_waited_seconds(std::max(0.0, std::chrono::duration<double>(job->started - w.received).count()));
        r.set_seconds(job->seconds);
        if (job->status.ok()) {
          r.set_report_json(job->report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        } else {
          r.set_code(static_cast<uint32_t>(job->status.code()));
          r.set_error(job->status.message().substr(0, 4000));
        }
        if (i > 0) {
          std::lock_guard lock(mu_);
          ++stats_.joined;
        }
        Send(w.peer, r);
      }
    }
    return !finished.empty();
  }

  void RecoveryThread(std::promise<Result<size_t>>& opened) {
    StoreClientOptions so;
    so.secret = o_.secret;
    so.link_bytes_per_second = o_.link_bytes_per_second;
    // Patient: a data node stalled in a slow fsync (8 s seen on this loaded
    // machine) must not fail a whole recovery, as it did with the loaders'
    // 3 s peer timeout and 5 s connects.
    so.peer_timeout = std::chrono::seconds(15);
    so.connect_timeout = std::chrono::seconds(15);
    so.request_timeout = std::chrono::seconds(30);
    auto store = StoreClient::Open(o_.catalog, so);
    if (!store.ok()) {
      opened.set_value(store.status());
      return;
    }
    auto claims = StoreCatalog::Open(o_.catalog);  // this thread's own SQLite connection
    if (!claims.ok()) {
      opened.set_value(claims.status());
      return;
    }
    std::unique_ptr<StoreClient> client = std::move(*store);
    thread_catalog_ = std::move(*claims);
    opened.set_value(client->ReachableNodes());  // `opened` is gone after this
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    host_ = host;
    const std::string owner = o_.name + " (pid " + std::to_string(::getpid()) + " on " + host + ")";
    while (true) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(mu_);
        // Idle, the store client's connections still need driving (their
        // heartbeats), or the nodes drop them and the next recovery starts
        // by connecting again.
        while (!stopping_ && waiting_.empty()) {
          if (cv_.wait_for(lock, kKeepAliveInterval) == std::cv_status::timeout) {
            lock.unlock();
            client->KeepAlive();
            lock.lock();
          }
        }
        if (waiting_.empty()) return;  // stopping, nothing left
        job = waiting_.front();
        waiting_.pop_front();
        job->id = ++stats_.recoveries;
        job->started = Clock::now();
        running_ = job;
      }
      Run(*client, owner, *job);
      {
        std::lock_guard lock(mu_);
        running_.reset();
        finished_.push_back(job);
      }
      done_cv_.notify_all();
    }
  }

  void Run(StoreClient& client, const std::string& owner, Job& job) {
    const RecoveryRequest& r = job.request;
    spdlog::info("{}: recovery {}: {} of {} starts", o_.name, job.id, r.options.policy, Name(r.dataset));
    job.status = [&]() -> Status {
      TENAX_RETURN_IF_ERROR(client.Refresh());
      // Only the service holds this claim while it rebuilds: a recover
      // process or a job's loader that tries meanwhile finds it taken.
      std::string holder = owner;
      if (!r.dataset.empty()) {
        TENAX_ASSIGN_OR_RETURN(holder, thread_catalog_->ClaimRecovery(r.dataset, owner, kClaimStaleSeconds));
        if (holder != owner && DeadOnThisHost(holder, host_)) {
          // A killed service or loader on this machine left its claim; it
          // would block the dataset until the claim goes stale (an hour).
          spdlog::warn("{}: the recovery claim of {} was held by {}, which no longer runs: taking it over", o_.name,
                       r.dataset, holder);
          TENAX_RETURN_IF_ERROR(thread_catalog_->ReleaseRecovery(r.dataset, holder));
          TENAX_ASSIGN_OR_RETURN(holder, thread_catalog_->ClaimRecovery(r.dataset, owner, kClaimStaleSeconds));
        }
      }
      if (holder != owner) {
        return Unavailable("a recovery of " + r.dataset + " is already running in " + holder +
                           "; ask again when it ends");
      }
      const TransportBytes before = client.transport_bytes();
      const auto start = Clock::now();
      auto reports = client.Recover(r.dataset, r.options, /*verify=*/false, /*only_live_nodes=*/false,
                                    TierByImportantClasses(r.important_classes));
      job.seconds = SecondsSince(start);
      if (!r.dataset.empty()) {
        if (Status st = thread_catalog_->ReleaseRecovery(r.dataset, owner); !st.ok()) {
          spdlog::warn("{}: cannot release the recovery claim of {}: {}", o_.name, r.dataset, st.message());
        }
      }
      if (!reports.ok()) return reports.status();
      const TransportBytes after = client.transport_bytes();
      nlohmann::json results = nlohmann::json::array();
      for (const RecoveryReport& rep : *reports) results.push_back(RecoveryReportJson(rep, kMaxReportedLosses));
      job.report = {{"catalog", o_.catalog},
                    {"results", results},
                    {"transport_bytes", {{"read", after.read - before.read}, {"written", after.written - before.written}}}};
      return Status::Ok();
    }();
    if (job.status.ok()) {
      spdlog::info("{}: recovery {} of {} done in {:.3f} s for {} requester(s)", o_.name, job.id, Name(r.dataset),
                   job.seconds, job.waiters.size());
    } else {
      spdlog::error("{}: recovery {} of {} failed: {}", o_.name, job.id, Name(r.dataset), job.status.message());
    }
  }

  const RecoveryServiceOptions& o_;
  std::unique_ptr<net::Node> node_;
  std::unique_ptr<StoreCatalog> catalog_;         // the serving thread's (dataset checks)
  std::unique_ptr<StoreCatalog> thread_catalog_;  // the recovery thread's (claims)
  std::string host_;                              // this machine's name, in claims
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  bool stopping_ = false;
  std::deque<std::shared_ptr<Job>> waiting_;
  std::shared_ptr<Job> running_;
  std::vector<std::shared_ptr<Job>> finished_;
  RecoveryServiceReport stats_;
};

}  // namespace

Result<RecoveryServiceReport> RunRecoveryService(const RecoveryServiceOptions& o) {
  TENAX_ASSIGN_OR_RETURN(auto catalog, StoreCatalog::Open(o.catalog));
  net::NodeOptions no;
  no.name = o.name;
  TENAX_ASSIGN_OR_RETURN(no.secret, net::ResolveSecret(o.secret));
  no.peer_timeout = o.peer_timeout;
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen(o.listen_host, o.port));
  RecoveryService service(o, std::move(node), std::move(catalog));
  TENAX_ASSIGN_OR_RETURN(size_t reachable, service.StartRecoveryThread());
  spdlog::info("{}: catalog {} open, {} data nodes connected; listening on {}:{}", o.name, o.catalog, reachable,
               o.listen_host, port);
  if (o.on_ready) o.on_ready(port, reachable);
  TENAX_RETURN_IF_ERROR(service.Serve());
  return service.report();
}

RecoveryServiceClient::~RecoveryServiceClient() {
  if (node_ && connected_) node_->Disconnect(peer_, Deadline::After(500ms));
}

Result<std::unique_ptr<RecoveryServiceClient>> RecoveryServiceClient::Connect(const std::string& address,
                                                                              const std::string& secret,
                                                                              std::chrono::milliseconds timeout) {
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(address));
  net::NodeOptions no;
  no.name = "recovery-client";
  TENAX_ASSIGN_OR_RETURN(no.secret, net::ResolveSecret(secret));
  // A recovery can take minutes: the client waits for its answer without
  // sending, so heartbeats alone tell it the service is there.
  no.peer_timeout = 10s;
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  std::unique_ptr<RecoveryServiceClient> c(new RecoveryServiceClient(std::move(node), 0, address));
  c->host_ = hp.host;
  c->port_ = hp.port;
  c->timeout_ = timeout;
  TENAX_RETURN_IF_ERROR(c->Reconnect());
  return c;
}

Status RecoveryServiceClient::Reconnect() {
  if (connected_) node_->Disconnect(peer_, Deadline::After(200ms));
  connected_ = false;
  auto peer = node_->Connect(host_, port_, Deadline::After(timeout_));
  if (!peer.ok()) {
    return Status(peer.status().code(), "the recovery service at " + address_ +
                                            ": cannot connect (is 'tenax store serve' running there?): " +
                                            peer.status().message());
  }
  peer_ = *peer;
  connected_ = true;
  return Status::Ok();
}

Result<RecoveryAnswer> RecoveryServiceClient::Recover(const RecoveryRequest& request, Deadline deadline) {
  wire::RecoverRequest w;
  w.set_dataset(request.dataset);
  w.set_policy(request.options.policy);
  w.set_rebuild_later(request.options.rebuild_later);
  w.set_min_available(request.options.prm.min_available);
  w.set_class_tolerance(request.options.prm.class_tolerance);
  w.set_background_bytes_per_second(request.options.background_bytes_per_second);
  for (int c : request.important_classes) {
    if (c < 0 || c > 255) return InvalidArgument("important class " + std::to_string(c) + ": classes are 0..255");
    w.add_important_classes(static_cast<uint32_t>(c));
  }
  // A client that sat idle (the connection undriven for longer than the
  // service's peer timeout) finds its connection dropped: it connects again
  // and asks once more. Asking twice is safe: the service joins an equal
  // request, and a second recovery finds nothing left to rebuild.
  node_->Progress();
  if (!connected_ || !node_->PeerStatus(peer_).ok()) TENAX_RETURN_IF_ERROR(Reconnect());
  for (int attempt = 0;; ++attempt) {
    auto answer = Ask(w, deadline);
    if (answer.ok() || attempt == 1 || node_->PeerStatus(peer_).ok() || deadline.Expired()) return answer;
    spdlog::warn("the recovery service at {}: {}; connecting again", address_, answer.status().message());
    TENAX_RETURN_IF_ERROR(Reconnect());
  }
}

Result<RecoveryAnswer> RecoveryServiceClient::Ask(wire::RecoverRequest& w, Deadline deadline) {
  const std::string who = "the recovery service at " + address_;
  const uint64_t id = next_request_++;
  w.set_request_id(id);
  if (Status st = node_->SendControl(peer_, kRecoverRequestKind, w.SerializeAsString(), deadline); !st.ok()) {
    return Status(st.code(), who + ": " + st.message());
  }
  while (true) {
    auto msg = node_->ReceiveControl(deadline, peer_, kRecoverReplyKind);
    if (!msg.ok()) {
      return Status(msg.status().code(), who + ": no answer to the recovery request: " + msg.status().message());
    }
    TENAX_ASSIGN_OR_RETURN(wire::RecoverReply reply, DecodeRecoverReply(msg->payload, who));
    // Id 0: the service could not read the request (it says why).
    if (reply.request_id() != id && reply.request_id() != 0) continue;  // a late answer to an earlier request
    if (reply.code() != 0) return Status(static_cast<StatusCode>(reply.code()), reply.error());
    RecoveryAnswer a;
    a.report = nlohmann::json::parse(reply.report_json(), nullptr, false);  // checked by the decoder
    a.joined = reply.joined();
    a.recovery_id = reply.recovery_id();
    a.waited_seconds = reply.waited_seconds();
    a.seconds = reply.seconds();
    return a;
  }
}

}  // namespace tenax::store
