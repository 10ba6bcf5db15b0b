#include "engine.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"

namespace tenax::python {
namespace {

// Where peers reach this rank (process_group_tenax.h).
std::string AdvertisedHost() {
  if (const char* h = std::getenv("TENAX_HOST"); h && *h) return h;
  const char* master = std::getenv("MASTER_ADDR");
  const std::string m = master ? master : "";
  if (m.empty() || m == "localhost" || m.rfind("127.", 0) == 0 || m == "::1") return "127.0.0.1";
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &found) != 0) return "127.0.0.1";
  std::string out = "127.0.0.1";
  for (addrinfo* a = found; a; a = a->ai_next) {
    char text[INET_ADDRSTRLEN] = {0};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
    if (!::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text))) continue;
    if (std::string(text).rfind("127.", 0) != 0) {
      out = text;
      break;
    }
  }
  ::freeaddrinfo(found);
  return out;
}

std::string StoreText(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key) {
  const std::vector<uint8_t> v = store->get(key);
  return std::string(v.begin(), v.end());
}

void StoreSet(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key, const std::string& value) {
  store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

// TENAX_SECRET, or one rank 0 drew and shared through the store.
std::string JobSecret(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  if (const char* s = std::getenv(net::kSecretEnvVar); s && *s) return s;
  if (rank != 0) return StoreText(store, "tenax/secret");
  std::string hex;
  for (unsigned char c : net::RandomNonce() + net::RandomNonce()) {
    char two[3];
    std::snprintf(two, sizeof(two), "%02x", c);
    hex += two;
  }
  StoreSet(store, "tenax/secret", hex);
  return hex;
}

std::string Frame(uint64_t key, const std::string& body) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &key, 8);
  return out + body;
}

std::string Unstamped(const std::string& stamped) { return stamped.substr(stamped.find(' ') + 1); }

}  // namespace

TenaxWork::TenaxWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool TenaxWork::isCompleted() { return future_->completed(); }

bool TenaxWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr TenaxWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

bool TenaxWork::wait(std::chrono::milliseconds /*the group's own deadline bounds every op*/) {
  future_->wait();
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

void TenaxWork::Finish(const Status& st) {
  status_ = st;
  if (st.ok()) {
    future_->markCompleted(c10::IValue(outputs_));
  } else {
    future_->setError(std::make_exception_ptr(std::runtime_error(st.message())));
  }
}

TenaxEngine::TenaxEngine(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                         std::chrono::milliseconds timeout)
    : rank_(rank), world_(world), timeout_(timeout) {
  Start([store](TenaxEngine& e) { return e.Connect(store); },
        "rank " + std::to_string(rank) + " of " + std::to_string(world) + " could not join its group");
}

TenaxEngine::TenaxEngine(Job connect, const std::string& what, std::chrono::milliseconds timeout)
    : rank_(-1), world_(0), timeout_(timeout) {
  Start(std::move(connect), what);
}

void TenaxEngine::Start(Job connect, const std::string& what) {
  std::promise<Status> ready;
  std::future<Status> connected = ready.get_future();
  thread_ = std::thread([this, connect = std::move(connect), &ready] { Run(connect, ready); });
  const Status st = connected.get();
  if (!st.ok()) {
    thread_.join();
    TORCH_CHECK(false, "tenax backend: ", what, ": ", st.message());
  }
}

void TenaxEngine::SetGroup(std::unique_ptr<comm::Group> group) {
  sum_.reset();  // its buffers are registered with the old group's peers
  ForgetCrossMemory();
  group_ = std::move(group);
  DropKeptBefore(group_ ? group_->generation() : 0);
  broken_ = Status();
  rank_ = group_ ? group_->rank() : -1;
  world_ = group_ ? group_->world() : 0;
}

// Keeps only rounds of `generation` or later (a peer may be a generation
// ahead); everything else was meant for a group that is gone.
void TenaxEngine::DropKeptBefore(uint64_t generation) {
  for (auto it = kept_.begin(); it != kept_.end();) {
    const uint64_t key = it->first.second;
    const bool keep = (key >> 32) == (kGenerationTag >> 32) && static_cast<uint32_t>(key) >= (generation & 0xffffffffu);
    it = keep ? std::next(it) : kept_.erase(it);
  }
}

std::unique_ptr<comm::Group> TenaxEngine::TakeGroup() {
  sum_.reset();
  ForgetCrossMemory();
  return std::move(group_);  // kept_ waits for the next group (SetGroup)
}

Status TenaxEngine::TakeTolerated() {
  std::lock_guard<std::mutex> lock(mu_);
  Status st = tolerated_;
  tolerated_ = Status();
  return st;
}

Status TenaxEngine::RunAndWait(std::string what, Job job) {
  auto work = Submit(c10d::OpType::UNKNOWN, std::move(what), {}, std::move(job), false, /*runs_when_broken=*/true);
  auto* w = static_cast<TenaxWork*>(work.get());
  auto future = w->getFuture();
  future->wait();
  return w->status();
}

TenaxEngine::~TenaxEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  finished_.clear();  // on the caller's thread (see finished_)
}

c10::intrusive_ptr<c10d::Work> TenaxEngine::Submit(c10d::OpType type, std::string what,
                                                   std::vector<at::Tensor> outputs, Job job, bool tolerant,
                                                   bool runs_when_broken) {
  auto work = c10::make_intrusive<TenaxWork>(rank_, type, std::move(outputs));
  std::deque<Pending> finished;  // dropped here, outside the lock (see finished_)
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(what), work, std::move(job), tolerant, runs_when_broken});
    finished.swap(finished_);
  }
  cv_.notify_all();
  return work;
}

Status TenaxEngine::Agree(const std::string& mine) {
  const std::string stamped = std::to_string(seq_) + " " + mine;
  TENAX_ASSIGN_OR_RETURN(std::vector<std::string> all, AllGather(kCollectiveKey, stamped));
  for (int r = 0; r < world_; ++r) {
    const std::string& d = all[static_cast<size_t>(r)];
    if (auto bad = d.find(" refused: "); bad != std::string::npos) {
      return InvalidArgument("rank " + std::to_string(r) + "'s input is refused: " + d.substr(bad + 10));
    }
  }
  for (int r = 1; r < world_; ++r) {
    if (all[static_cast<size_t>(r)] != all[0]) {
      return InvalidArgument("the ranks disagree about collective #" + std::to_string(seq_) + ": rank 0 passed " +
                             Unstamped(all[0]) + ", rank " + std::to_string(r) + " passed " +
                             Unstamped(all[static_cast<size_t>(r)]));
    }
  }
  return Status();
}

Result<std::vector<std::string>> TenaxEngine::AllGather(uint64_t key, const std::string& bytes) {
  std::vector<std::string> out(static_cast<size_t>(world_));
  out[static_cast<size_t>(rank_)] = bytes;
  auto framed = std::make_unique<std::string>(Frame(key, bytes));
  std::vector<net::Op> sends;
  for (int r = 0; r < world_; ++r) {
    if (r != rank_) sends.push_back(node_->StartBulk(group_->peer(r), framed->data(), framed->size()));
  }
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    Result<std::string> got = Receive(r, key);
    if (!got.ok()) {
      // Sends may still read `framed` after their requests are dropped.
      orphans_.push_back(std::move(framed));
      return got.status();
    }
    out[static_cast<size_t>(r)] = std::move(*got);
  }
  TENAX_RETURN_IF_ERROR(node_->WaitAll(sends, OpDeadline()));
  return out;
}

Status TenaxEngine::Send(int to, uint64_t key, const std::string& bytes) {
  const std::string framed = Frame(key, bytes);
  return Named(node_->SendBulk(group_->peer(to), framed.data(), framed.size(), OpDeadline()), to);
}

Result<std::string> TenaxEngine::Receive(int from, uint64_t key) {
  const net::PeerId peer = group_->peer(from);
  auto& kept = kept_[{peer, key}];
  if (!kept.empty()) {
    std::string m = std::move(kept.front());
    kept.pop_front();
    return m;
  }
  const Deadline deadline = OpDeadline();
  const Deadline now = Deadline::At(SteadyClock::time_point::min());
  // A peer on its own core answers within microseconds; past this, it is
  // computing or descheduled.
  // Spinning longer would take the core from a rank (or this rank's own
  // training thread) that needs it; the engine thread's timer slack is
  // 1 µs (Run), so a sleep is not stretched to the default 50 µs slack.
  constexpr auto kSpin = std::chrono::microseconds(200);
  constexpr auto kSleep = std::chrono::microseconds(50);
  for (SteadyClock::time_point idle_since{};;) {
    // Polled without blocking, so that a long wait can sleep: with more
    // processes than cores, a waiter that spins (even yielding) burns the
    // core that the rank it waits for needs, or this rank's own compute
    // thread. A peer lost meanwhile is reported at once.
    node_->Progress();
    Result<net::BulkMessage> m = node_->ReceiveBulk(now, group_->peer(from));
    if (!m.ok() && m.status().code() == StatusCode::kDeadlineExceeded) {
      if (deadline.Expired()) return Named(node_->ReceiveBulk(deadline, group_->peer(from)).status(), from);
      const auto t = SteadyClock::now();
      if (idle_since == SteadyClock::time_point{}) idle_since = t;
      if (t - idle_since > kSpin) std::this_thread::sleep_for(kSleep);
      continue;
    }
    idle_since = {};
    if (!m.ok()) return Named(m.status(), from);
    if (m->data.size() < 8) return ProtocolError("rank " + std::to_string(from) + " sent a message without its key");
    uint64_t got = 0;
    std::memcpy(&got, m->data.data(), 8);
    std::string body(reinterpret_cast<const char*>(m->data.data()) + 8, m->data.size() - 8);
    if (got == key) return body;
    // A generation-tagged round of an older generation is stale: drop it.
    if ((got >> 32) == (kGenerationTag >> 32) && static_cast<uint32_t>(got) < static_cast<uint32_t>(GenerationKey())) {
      continue;
    }
    kept_[{peer, got}].push_back(std::move(body));
  }
}

void TenaxEngine::ForgetCrossMemory() {
  cross_.reset();
  cross_probed_ = false;
  std::lock_guard<std::mutex> lock(mu_);
  cross_why_not_.clear();
}

std::string TenaxEngine::cross_memory_state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cross_why_not_;
}

Status TenaxEngine::FastSum(float* data, size_t count, float scale) {
  if (world_ > 1 && count * sizeof(float) >= kCrossMemoryMinBytes) {
    if (!cross_probed_) {
      std::string why_not;
      TENAX_ASSIGN_OR_RETURN(cross_, CrossMemorySum::Probe(*this, why_not));
      cross_probed_ = true;
      std::lock_guard<std::mutex> lock(mu_);
      cross_why_not_ = cross_ ? "on" : "off: " + why_not;
    }
    if (cross_) {
      TENAX_RETURN_IF_ERROR(cross_->Run(*this, data, count, scale));
      ++cross_count_;
      ++fast_;
      return Status();
    }
  }
  if (!sum_ || sum_->count() < count) {
    sum_.reset();  // every rank sees the same sizes in the same order, so all re-create together
    TENAX_ASSIGN_OR_RETURN(sum_, comm::Allreduce::Create(*group_, std::max<size_t>(count, size_t{1} << 18),
                                                         OpDeadline()));
  }
  // The tensor is read in place (Start's `input`: no copy in); pieces are
  // copied out of the registered buffer as soon as they complete, which
  // overlaps the waits for peers and touches memory while it is in cache.
  constexpr size_t kPiece = size_t{1} << 20;  // floats
  float* buffer = sum_->data();
  TENAX_ASSIGN_OR_RETURN(const uint64_t before, sum_->Poll());
  const size_t pieces = (count + kPiece - 1) / kPiece;
  size_t copied_out = 0;
  auto copy_out_done = [&](uint64_t completed) {
    for (; copied_out < completed - before; ++copied_out) {
      const size_t off = copied_out * kPiece, n = std::min(kPiece, count - off);
      std::memcpy(data + off, buffer + off, n * sizeof(float));
    }
  };
  for (size_t i = 0; i < pieces; ++i) {
    const size_t off = i * kPiece, n = std::min(kPiece, count - off);
    TENAX_RETURN_IF_ERROR(sum_->Start(off, n, scale, data + off));
    TENAX_ASSIGN_OR_RETURN(uint64_t completed, sum_->Poll());
    copy_out_done(completed);
  }
  const Deadline deadline = OpDeadline();
  for (uint32_t idle = 0; copied_out < pieces;) {
    TENAX_ASSIGN_OR_RETURN(uint64_t completed, sum_->Poll());
    if (completed - before > copied_out) {
      copy_out_done(completed);
      idle = 0;
      continue;
    }
    if (deadline.Expired()) return sum_->Wait(deadline);  // names the rank it waited for
    // Spin briefly (a peer on its own core answers within microseconds),
    // then give the core away: processes may outnumber cores. A peer lost
    // meanwhile fails the sum at once (not at the deadline).
    if (++idle > 64) {
      // Past a few thousand polls a peer is computing, not answering:
      // sleep briefly, since with more processes than cores a yield still
      // burns the core that peer needs.
      if (idle > 4096) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      } else {
        std::this_thread::yield();
      }
      if (idle % 256 == 0) TENAX_RETURN_IF_ERROR(group_->Health());
    }
  }
  ++fast_;
  return Status();
}

Status TenaxEngine::Named(const Status& st, int peer) const {
  if (st.ok()) return st;
  return Status(st.code(), "rank " + std::to_string(peer) + ": " + st.message());
}

void TenaxEngine::Run(const Job& connect, std::promise<Status>& ready) {
  ::prctl(PR_SET_TIMERSLACK, 1000UL);  // ns: the short sleeps of Receive's waits stay short
  Status st;
  try {
    st = connect(*this);
  } catch (const std::exception& e) {
    st = Internal(e.what());
  }
  const bool ok = st.ok();
  ready.set_value(st);  // the constructor returns (and `ready` dies) after this
  if (!ok) {
    group_.reset();
    node_.reset();
    return;
  }
  Loop();
  sum_.reset();
  group_.reset();
  node_.reset();
}

Status TenaxEngine::Connect(const c10::intrusive_ptr<c10d::Store>& store) {
  try {
    net::NodeOptions o;
    o.name = "torch rank " + std::to_string(rank_);
    o.secret = JobSecret(store, rank_);
    if (const char* t = std::getenv("TENAX_TRANSPORTS")) o.transports = t;
    if (const char* t = std::getenv("TENAX_TCP_STREAMS")) o.tcp_streams = std::atoi(t);  // Node::Create checks it
    TENAX_ASSIGN_OR_RETURN(node_, net::Node::Create(o));
    const std::string host = AdvertisedHost();
    TENAX_ASSIGN_OR_RETURN(uint16_t port, node_->Listen(host, 0));
    StoreSet(store, "tenax/addr/" + std::to_string(rank_), host + ":" + std::to_string(port));
    std::vector<comm::GroupMember> members;
    for (int r = 0; r < world_; ++r) {
      const std::string addr = StoreText(store, "tenax/addr/" + std::to_string(r));
      TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(addr));
      members.push_back({hp.host, hp.port, "rank " + std::to_string(r) + " at " + addr, static_cast<uint32_t>(r), true});
    }
    TENAX_ASSIGN_OR_RETURN(group_, comm::Group::Connect(*node_, "torch", 1, rank_, std::move(members), OpDeadline()));
    return Status();
  } catch (const std::exception& e) {  // the store's own timeout or failure
    return Unavailable(std::string("the rendezvous through torch's store failed: ") + e.what());
  }
}

void TenaxEngine::Loop() {
  for (;;) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Drive the Node while idle: peers declare a silent node lost.
      cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) {
        if (stop_) return;
        lock.unlock();
        node_->Progress();
        continue;
      }
      p = std::move(queue_.front());
      queue_.pop_front();
    }
    Status st = p.runs_when_broken ? Status() : broken_;
    if (st.ok()) {
      ++seq_;
      try {
        st = p.job(*this);
      } catch (const std::exception& e) {  // an ATen kernel refusing a dtype, say
        st = InvalidArgument(e.what());
      }
      // A transport failure leaves the ranks out of step: later calls fail the same way, at once.
      if (st.code() == StatusCode::kPeerLost || st.code() == StatusCode::kDeadlineExceeded ||
          st.code() == StatusCode::kProtocolError || st.code() == StatusCode::kUnavailable ||
          st.code() == StatusCode::kRefused) {
        broken_ = Status(st.code(), "the group broke during " + p.what + ": " + st.message());
      }
    }
    if (!st.ok()) {
      st = Status(st.code(), "tenax backend, rank " + std::to_string(rank_) + ", " + p.what + ": " + st.message());
    }
    if (p.tolerant && !st.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (tolerated_.ok()) tolerated_ = st;
      }
      st = Status();
    }
    p.work->Finish(st);
    std::lock_guard<std::mutex> lock(mu_);
    finished_.push_back(std::move(p));
  }
}

}  // namespace tenax::python
