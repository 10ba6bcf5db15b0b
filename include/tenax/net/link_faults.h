// Network faults at the transport seam (issue 32; docs/config.md, "link
// faults"): for a while, the link between two emulated hosts drops every
// message, or runs 10x slower. tc netem does not exist on our machines, so
// these live where the emulated delay and loss do (emulated_links.h): in
// every Node, between hosts it knows from the handshake.
//
// The launcher's fault plan writes the faults in force to one JSON file
// (LinkFaultBook::ToJson, atomically replaced) and hands its path to every
// child in TENAX_LINK_FAULTS. Each Node on an emulated host re-reads the
// file when it changes (LinkFaultWatcher) and applies what concerns its own
// links:
//  - drop: nothing from the peer is taken in until the window ends (its
//    messages, heartbeats, puts and flushes are held, then handled in
//    their order, as TCP delivers after a partition heals); this node's own
//    puts to the peer complete no earlier than the window's end. A window
//    longer than NodeOptions::peer_timeout loses the peer, as a real
//    partition would;
//  - slow: one-sided traffic to and from the peer takes the link's delay
//    times `factor`, plus `delay_ms`, and its nominal bandwidth divided by
//    `factor` (a bad NIC: `tenax run`'s slow_host fault).
// Windows are in wall-clock milliseconds since the epoch, so that processes
// in other network namespaces (one clock) agree on them.
//
// Pure data plus a file watcher; thread-compatible (the Node's thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::net {

inline constexpr char kLinkFaultsEnvVar[] = "TENAX_LINK_FAULTS";

enum class LinkFaultKind { kDrop, kSlow };

struct LinkFault {
  std::string a, b;  // two emulated hosts (the link between them, both ways)
  LinkFaultKind kind = LinkFaultKind::kDrop;
  double factor = 10;  // slow: how many times slower (2..1000)
  int64_t from_ms = 0;   // wall clock, ms since the epoch
  int64_t until_ms = 0;  // exclusive
  double delay_ms = 0;   // slow: one-way delay added on top (0..10000)
  bool operator==(const LinkFault&) const = default;
};

// The faults a launcher has in force.
struct LinkFaultBook {
  std::vector<LinkFault> faults;

  // The fault on the link between hosts x and y (either order) at `now_ms`:
  // a drop before a slow one, else the slowest; nullopt when none.
  std::optional<LinkFault> Active(const std::string& x, const std::string& y, int64_t now_ms) const;
  // Drops the faults that ended before `now_ms`.
  void Prune(int64_t now_ms);

  std::string ToJson() const;
  // Replaces `path` with ToJson() atomically for its readers (a temporary
  // file renamed over it) but without fsync: the file is a live control
  // channel, not a record, and an fsync on a loaded disk stalled the
  // launcher's thread for seconds (its coordinator then dropped it as
  // silent). IoError naming the path.
  Status WriteTo(const std::string& path) const;
  // InvalidArgument naming the entry and key for anything malformed
  // (unknown kind, a host missing, a window that ends before it starts, a
  // factor out of 2..1000, a delay_ms out of 0..10000, more than 4096
  // entries).
  static Result<LinkFaultBook> FromJson(const std::string& text);
};

// "drop" or "slow".
const char* LinkFaultKindName(LinkFaultKind kind);

// Wall-clock milliseconds since the epoch.
int64_t WallMillis();

// Follows a link-fault file: Poll() re-reads it when its modification time
// or size changed, at most once per `interval_ms`. A missing file is an
// empty book; a malformed one keeps the last good book and is reported once
// per change through error().
class LinkFaultWatcher {
 public:
  explicit LinkFaultWatcher(std::string path, int64_t interval_ms = 50) : path_(std::move(path)), interval_ms_(interval_ms) {}

  // True when the book changed since the last call (the caller then
  // re-applies it).
  bool Poll(int64_t now_ms);
  const LinkFaultBook& book() const { return book_; }
  const std::string& path() const { return path_; }
  // The last read's error ("" when it parsed).
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  int64_t interval_ms_;
  int64_t next_check_ms_ = 0;
  int64_t mtime_ns_ = -1;
  off_t size_ = -1;
  LinkFaultBook book_;
  std::string error_;
};

}  // namespace tenax::net
