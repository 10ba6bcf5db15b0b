// The plain-sockets peer of tenax's allreduce benchmark: a textbook ring
// allreduce (reduce-scatter, then allgather; 2(P-1) steps of one chunk each)
// on blocking-free TCP sockets, one thread per rank, no library in between.
// Each step sends a chunk to the next rank while it receives one from the
// previous (poll over both sockets), and sums what it receives 256 KiB at a
// time while the piece is still in cache; the allgather receives straight
// into the caller's buffer.
//
// Why it is here: over TCP on one host, every allreduce pays the kernel's
// two socket copies for every byte it must move, 2(P-1)/P x size per rank.
// This program pays exactly that plus one sum and nothing else, so its time
// is what TCP itself allows on this machine, measured in the same run as
// tenax and Gloo: a target stated as a fraction of Gloo's time can be read
// against it (`tenax bench allreduce --transports tcp`).
//
// Rendezvous: each rank listens on --host, writes its port to
// STORE_DIR/rank-R (written whole, then renamed), connects to rank R+1's and
// accepts rank R-1's. A peer that does not show up within 60 s, or a socket
// that fails, ends the process with exit code 1 and one line naming the rank.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "allreduce_peer_common.h"

namespace {

constexpr const char* kUsageHead =
    "usage: tenax_bench_socket_ring --rank R --procs P --store-dir DIR\n"
    "                               [--sizes B1,B2,...] [--budget-bytes N]\n"
    "                               [--min-iters N] [--warmup N] [--host ADDR] [--help]\n"
    "  --rank, --procs this process's rank in [0, P) and the number of processes\n"
    "  --store-dir     rendezvous directory shared by all ranks; use a fresh one\n"
    "  --host          the address to listen on and reach the others at, default 127.0.0.1\n";

constexpr size_t kSumPiece = 256 << 10;  // bytes summed at a time, while still in cache
constexpr auto kRendezvousLimit = std::chrono::seconds(60);

[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

void SetNonBlocking(int fd) {
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) Fail("setsockopt TCP_NODELAY");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) Fail("fcntl O_NONBLOCK");
}

class Ring {
 public:
  explicit Ring(const allreduce_peer::Args& a) : rank_(static_cast<int>(a.rank)), procs_(static_cast<int>(a.procs)) {
    if (procs_ == 1) return;
    Connect(a);
  }
  ~Ring() {
    if (next_ >= 0) ::close(next_);
    if (prev_ >= 0) ::close(prev_);
  }

  // In-place sum of `count` floats over the ring.
  void Allreduce(float* data, size_t count) {
    if (procs_ == 1) return;
    const int p = procs_;
    auto chunk_begin = [&](int c) { return count * static_cast<size_t>(c) / static_cast<size_t>(p); };
    auto chunk_len = [&](int c) { return chunk_begin(c + 1) - chunk_begin(c); };
    if (scratch_.size() < chunk_len(0) + 1) scratch_.resize(chunk_len(0) + 1);
    // Reduce-scatter: at step s, send chunk (rank - s) and add chunk (rank - s - 1).
    for (int s = 0; s < p - 1; ++s) {
      const int send_c = ((rank_ - s) % p + p) % p, recv_c = ((rank_ - s - 1) % p + p) % p;
      float* dst = data + chunk_begin(recv_c);
      const float* src = scratch_.data();
      size_t summed = 0;  // floats of the received chunk already added
      Exchange(reinterpret_cast<const char*>(data + chunk_begin(send_c)), chunk_len(send_c) * 4,
               reinterpret_cast<char*>(scratch_.data()), chunk_len(recv_c) * 4, [&](size_t got, bool done) {
                 const size_t ready = got / 4;
                 if (ready - summed < kSumPiece / 4 && !done) return;
                 for (size_t i = summed; i < ready; ++i) dst[i] += src[i];
                 summed = ready;
               });
    }
    // Allgather: at step s, send chunk (rank + 1 - s), receive chunk (rank - s) in place.
    for (int s = 0; s < p - 1; ++s) {
      const int send_c = ((rank_ + 1 - s) % p + p) % p, recv_c = ((rank_ - s) % p + p) % p;
      Exchange(reinterpret_cast<const char*>(data + chunk_begin(send_c)), chunk_len(send_c) * 4,
               reinterpret_cast<char*>(data + chunk_begin(recv_c)), chunk_len(recv_c) * 4, [](size_t, bool) {});
    }
  }

  // Every rank's `value`, max-combined, on every rank (a ring allgather of one double each).
  double Max(double value) {
    double best = value, pass = value;
    for (int s = 0; s < procs_ - 1; ++s) {
      double in = 0;
      Exchange(reinterpret_cast<const char*>(&pass), sizeof pass, reinterpret_cast<char*>(&in), sizeof in,
               [](size_t, bool) {});
      best = std::max(best, in);
      pass = in;
    }
    return best;
  }

 private:
  // Sends `out` to the next rank while receiving `in` from the previous one;
  // `progress(bytes_received, done)` after every read.
  template <typename Progress>
  void Exchange(const char* out, size_t out_len, char* in, size_t in_len, Progress progress) {
    size_t sent = 0, got = 0;
    while (sent < out_len || got < in_len) {
      pollfd fds[2] = {{next_, static_cast<short>(sent < out_len ? POLLOUT : 0), 0},
                       {prev_, static_cast<short>(got < in_len ? POLLIN : 0), 0}};
      if (::poll(fds, 2, 60000) <= 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error("rank " + std::to_string(rank_) + ": no progress from a neighbour in 60 s");
      }
      if (sent < out_len && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
        const ssize_t n = ::send(next_, out + sent, out_len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) Fail("rank " + std::to_string(rank_) + ": send to next");
        if (n > 0) sent += static_cast<size_t>(n);
      }
      if (got < in_len && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
        const ssize_t n = ::recv(prev_, in + got, in_len - got, 0);
        if (n == 0) {
          errno = ECONNRESET;
          Fail("rank " + std::to_string(rank_) + ": previous rank closed");
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) Fail("rank " + std::to_string(rank_) + ": recv from previous");
        if (n > 0) {
          got += static_cast<size_t>(n);
          progress(got, got == in_len);
        }
      }
    }
  }

  void Connect(const allreduce_peer::Args& a) {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) Fail("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (::inet_pton(AF_INET, a.host.c_str(), &addr.sin_addr) != 1) {
      throw std::runtime_error("--host " + a.host + " is not an IPv4 address");
    }
    socklen_t len = sizeof addr;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 4) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      Fail("listen on " + a.host);
    }
    const std::string mine = a.store_dir + "/rank-" + std::to_string(rank_);
    {
      std::ofstream f(mine + ".tmp");
      f << ntohs(addr.sin_port) << "\n";
      if (!f) Fail("write " + mine + ".tmp");
    }
    if (::rename((mine + ".tmp").c_str(), mine.c_str()) != 0) Fail("rename to " + mine);

    // Connect to the next rank once its port file exists.
    const int next_rank = (rank_ + 1) % procs_;
    const std::string theirs = a.store_dir + "/rank-" + std::to_string(next_rank);
    const auto deadline = std::chrono::steady_clock::now() + kRendezvousLimit;
    int port = 0;
    while (!(std::ifstream(theirs) >> port)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("rank " + std::to_string(next_rank) + " did not write " + theirs + " in 60 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a file the other process writes
    }
    next_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to = addr;
    to.sin_port = htons(static_cast<uint16_t>(port));
    if (next_ < 0 || ::connect(next_, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      Fail("rank " + std::to_string(rank_) + ": connect to rank " + std::to_string(next_rank));
    }
    pollfd pf{listener, POLLIN, 0};
    if (::poll(&pf, 1, static_cast<int>(kRendezvousLimit.count() * 1000)) != 1) {
      throw std::runtime_error("rank " + std::to_string(rank_) + ": the previous rank did not connect in 60 s");
    }
    prev_ = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (prev_ < 0) Fail("accept");
    ::close(listener);
    SetNonBlocking(next_);
    SetNonBlocking(prev_);
  }

  int rank_, procs_;
  int next_ = -1, prev_ = -1;
  std::vector<float> scratch_;
};

int Run(const allreduce_peer::Args& a) {
  ::mkdir(a.store_dir.c_str(), 0700);  // EEXIST is fine; a real problem shows at the port file
  Ring ring(a);
  const int rank = static_cast<int>(a.rank), procs = static_cast<int>(a.procs);
  return allreduce_peer::MeasureSizes(
      a, rank, procs, "sockets", "tenax_bench_socket_ring",
      [&](float* data, size_t count) { ring.Allreduce(data, count); }, [&] { ring.Max(0); },
      [&](double mine, bool wrong, double* slowest) {
        // Wrong sums anywhere fail every rank: a rank that saw them sends +inf.
        const double worst = ring.Max(wrong ? HUGE_VAL : mine);
        *slowest = worst;
        return worst != HUGE_VAL;
      });
}

}  // namespace

int main(int argc, char** argv) {
  return allreduce_peer::RankedPeerMain(argc, argv, "tenax_bench_socket_ring", kUsageHead, Run);
}
