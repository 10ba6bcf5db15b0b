// Link faults at the transport seam (link_faults.h): the Node follows the
// launcher's file and puts each ready peer's link into the state it names.
// What a state does lives where the traffic is: HandleFrame and
// ReleaseHeldFrames (messages), OnPutAm / OnFlushAm / Rma (one-sided).
#include <spdlog/spdlog.h>

#include <cmath>

#include "node_internal.h"

namespace tenax::net {

void Node::Impl::UpdateLinkFaults() {
  const auto now = SteadyClock::now();
  if (now < next_link_fault_check) return;
  next_link_fault_check = now + std::chrono::milliseconds(20);
  const int64_t now_ms = WallMillis();
  const std::string error_before = link_faults->error();
  link_faults->Poll(now_ms);
  if (!link_faults->error().empty() && link_faults->error() != error_before) {
    spdlog::warn("[{}] link faults ignored: {}", options.name, link_faults->error());
  }
  for (auto& [id, p] : peers) {
    std::optional<LinkFault> fault;
    if (p.phase == Phase::kReady && !p.emulated_host.empty() && p.emulated_host != options.emulated_host) {
      fault = link_faults->book().Active(options.emulated_host, p.emulated_host, now_ms);
    }
    ApplyLinkFault(p, fault, now_ms);
  }
}

void Node::Impl::ApplyLinkFault(PeerState& p, const std::optional<LinkFault>& fault, int64_t now_ms) {
  std::string what;
  if (fault) {
    what = std::string(LinkFaultKindName(fault->kind)) + " until " + std::to_string(fault->until_ms) +
           (fault->kind == LinkFaultKind::kSlow
                ? " x" + std::to_string(fault->factor) + " +" + std::to_string(fault->delay_ms) + " ms"
                : "");
  }
  if (what == p.link_fault) return;
  if (p.phase == Phase::kLost) {  // gone behind the fault: nothing to restore
    p.drop_until = {};
    p.fault_shaper.reset();
    p.link_fault = what;
    return;
  }
  const auto now = SteadyClock::now();
  const int64_t left_ms = fault ? std::max<int64_t>(0, fault->until_ms - now_ms) : 0;
  p.drop_until = {};
  p.fault_shaper.reset();
  if (fault && fault->kind == LinkFaultKind::kDrop) {
    p.drop_until = now + std::chrono::milliseconds(left_ms);
    spdlog::warn("[{}] link fault: the link to {} (host {}) drops everything for {} ms", options.name, p.Label(),
                 p.emulated_host, left_ms);
  } else if (fault) {
    // Slower by `factor`: the link's delay times it (plus delay_ms), its
    // bandwidth (the shape's, else the nominal one the kernel carries)
    // divided by it.
    const LinkShape base = p.shaper ? p.shaper->shape() : LinkShape{};
    LinkShape slow = base;
    slow.delay = std::chrono::microseconds(
        static_cast<int64_t>(std::llround(static_cast<double>(base.delay.count()) * fault->factor + fault->delay_ms * 1000)));
    const double rate = base.bandwidth_bytes_per_second > 0
                            ? base.bandwidth_bytes_per_second
                            : (options.emulated_links ? options.emulated_links->NominalRate(options.emulated_host,
                                                                                            p.emulated_host)
                                                      : 0);
    slow.bandwidth_bytes_per_second = rate > 0 ? rate / fault->factor : 0;
    if (slow.is_ideal()) {
      spdlog::warn("[{}] link fault: the link to {} (host {}) has no delay or bandwidth to slow down; left as is",
                   options.name, p.Label(), p.emulated_host);
    } else {
      p.fault_shaper.emplace(slow, p.id);
      spdlog::warn("[{}] link fault: the link to {} (host {}) is {}x slower for {} ms ({} us, {:.0f} MB/s)",
                   options.name, p.Label(), p.emulated_host, fault->factor, left_ms, slow.delay.count(),
                   slow.bandwidth_bytes_per_second / 1e6);
    }
  } else {
    spdlog::info("[{}] link fault over: the link to {} (host {}) is back", options.name, p.Label(), p.emulated_host);
  }
  p.link_fault = what;
}

}  // namespace tenax::net
