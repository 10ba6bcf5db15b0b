// A peer process for the transport tests. It listens on 127.0.0.1, prints
// "PORT <n>" on stderr, then serves every peer that passes the handshake:
//   kind 1 "<size>"        -> allocates a region filled with Pattern(i), replies kind 2 with its descriptor
//   kind 3 "<off> <len>"   -> replies kind 4 with the FNV-1a hash (hex) of those bytes of its region
//   kind 5 <bytes>         -> replies kind 6 with the same bytes (echo)
//   kind 9                 -> exits 0
// It exits by itself after 120 s without messages, so a crashed test
// never leaves it behind.
//
// usage: net_test_peer SECRET TRANSPORTS(""|tcp)
#include <cstdio>
#include <memory>
#include <sstream>
#include <vector>

#include "net_test_protocol.h"
#include "tenax/net/control_codec.h"
#include "tenax/net/node.h"

using namespace tenax;
using namespace tenax::net;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: net_test_peer SECRET TRANSPORTS\n");
    return 2;
  }
  NodeOptions o;
  o.name = "test-peer";
  o.secret = argv[1];
  o.transports = argv[2];
  o.net_devices = "lo";
  auto node = Node::Create(o);
  if (!node.ok()) {
    std::fprintf(stderr, "create: %s\n", node.status().ToString().c_str());
    return 1;
  }
  auto port = (*node)->Listen("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "listen: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "PORT %u\n", static_cast<unsigned>(*port));
  std::fflush(stderr);

  std::vector<MemoryRegion> regions;
  while (true) {
    auto msg = (*node)->ReceiveControl(Deadline::After(std::chrono::seconds(120)));
    if (!msg.ok()) return msg.status().code() == StatusCode::kDeadlineExceeded ? 3 : 1;
    const Deadline reply_deadline = Deadline::After(std::chrono::seconds(10));
    switch (msg->kind) {
      case testproto::kAlloc: {
        size_t size = std::stoull(msg->payload);
        auto r = (*node)->Allocate(size);
        if (!r.ok()) return 1;
        for (size_t i = 0; i < size; ++i) r->data()[i] = testproto::Pattern(i);
        const auto& d = r->descriptor();
        (void)(*node)->SendControl(msg->from, testproto::kRegion, EncodeRegion(d.address, d.length, d.rkey),
                                   reply_deadline);
        regions.push_back(std::move(*r));
        break;
      }
      case testproto::kHash: {
        std::istringstream in(msg->payload);
        size_t off = 0, len = 0;
        in >> off >> len;
        const MemoryRegion& r = regions.back();
        std::string reply = off + len <= r.size() ? testproto::HashHex(r.data() + off, len) : "out-of-range";
        (void)(*node)->SendControl(msg->from, testproto::kHashReply, reply, reply_deadline);
        break;
      }
      case testproto::kEcho:
        (void)(*node)->SendControl(msg->from, testproto::kEchoReply, msg->payload, reply_deadline);
        break;
      case testproto::kExit:
        return 0;
      default:
        break;
    }
  }
}
