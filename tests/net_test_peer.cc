// A peer process for the transport tests. It listens on 127.0.0.1, prints
// "PORT <n>" on stderr, then serves every peer that passes the handshake
// (kinds from net_test_protocol.h):
//   kAlloc "<size>"          -> allocates a region filled with Pattern(i), replies kRegion with its descriptor
//   kHash "<off> <len>"      -> replies kHashReply with the FNV-1a hash (hex) of those bytes of its last region
//   kEcho <bytes>            -> replies kEchoReply with the same bytes
//   kRead <region>           -> imports the sender's region (EncodeRegion), gets all of it, replies kReadReply
//                               with the bytes (or "error: ...")
//   kFlood "<count> <size>"  -> sends `count` kFloodItem messages of `size` bytes (the first 8 hold the index,
//                               decimal, zero-padded), then kFloodDone; stops at the first failed send
//   kPutForever <region>     -> imports the sender's region and puts 'p' bytes over all of it, again and
//                               again, until a put fails (the tests SIGKILL it meanwhile)
//   kConnectFlood "<port> <count> <size>"
//                            -> connects to another peer listening on its own host's <port>, replies
//                               kEchoReply "connected" (or "error: ..."), then floods that peer as kFlood
//                               does (the teardown stress test SIGKILLs it meanwhile)
//   kExit                    -> exits 0
// It exits by itself after 120 s without messages, so a crashed test
// never leaves it behind.
//
// usage: net_test_peer SECRET TRANSPORTS(""|tcp)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "net_test_protocol.h"
#include "tenax/net/control_codec.h"
#include "tenax/net/node.h"

using namespace tenax;
using namespace tenax::net;

namespace {

std::string ReadRegion(Node& node, PeerId from, const std::string& payload) {
  auto d = DecodeRegion(payload, "test client");
  if (!d.ok()) return "error: " + d.status().ToString();
  auto remote = node.Import(from, RegionDescriptor{d->address, d->length, d->rkey});
  if (!remote.ok()) return "error: " + remote.status().ToString();
  std::string bytes(d->length, '\0');
  Op get = node.Get(bytes.data(), bytes.size(), *remote, 0);
  if (Status st = node.Wait(get, Deadline::After(std::chrono::seconds(10))); !st.ok()) return "error: " + st.ToString();
  return bytes;
}

void Flood(Node& node, PeerId to, const std::string& payload, Deadline deadline) {
  std::istringstream in(payload);
  size_t count = 0, size = 0;
  in >> count >> size;
  std::string item(std::max<size_t>(size, 8), 'f');
  for (size_t i = 0; i < count; ++i) {
    item.replace(0, 8, testproto::FloodIndex(i).substr(0, 8));
    if (!node.SendControl(to, testproto::kFloodItem, item, deadline).ok()) return;
  }
  (void)node.SendControl(to, testproto::kFloodDone, std::to_string(count), deadline);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: net_test_peer SECRET TRANSPORTS [TCP_STREAMS [LISTEN_HOST NET_DEVICES]]\n");
    return 2;
  }
  NodeOptions o;
  o.name = "test-peer";
  o.secret = argv[1];
  o.transports = argv[2];
  if (argc > 3) o.tcp_streams = std::atoi(argv[3]);
  o.net_devices = argc > 5 ? argv[5] : "lo";
  const std::string listen_host = argc > 4 ? argv[4] : "127.0.0.1";
  auto node = Node::Create(o);
  if (!node.ok()) {
    std::fprintf(stderr, "create: %s\n", node.status().ToString().c_str());
    return 1;
  }
  auto port = (*node)->Listen(listen_host, 0);
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
        auto d = (*node)->Share(*r, msg->from);
        if (!d.ok()) break;  // the client went away
        (void)(*node)->SendControl(msg->from, testproto::kRegion, EncodeRegion(d->address, d->length, d->rkey),
                                   reply_deadline);
        regions.push_back(std::move(*r));
        break;
      }
      case testproto::kHash: {
        std::istringstream in(msg->payload);
        size_t off = 0, len = 0;
        in >> off >> len;
        std::string reply = "no-region";
        if (!regions.empty()) {
          const MemoryRegion& r = regions.back();
          reply = off + len <= r.size() ? testproto::HashHex(r.data() + off, len) : "out-of-range";
        }
        (void)(*node)->SendControl(msg->from, testproto::kHashReply, reply, reply_deadline);
        break;
      }
      case testproto::kEcho:
        (void)(*node)->SendControl(msg->from, testproto::kEchoReply, msg->payload, reply_deadline);
        break;
      case testproto::kRead:
        (void)(*node)->SendControl(msg->from, testproto::kReadReply, ReadRegion(**node, msg->from, msg->payload),
                                   reply_deadline);
        break;
      case testproto::kFlood:
        Flood(**node, msg->from, msg->payload, Deadline::After(std::chrono::seconds(30)));
        break;
      case testproto::kPutForever: {
        auto d = DecodeRegion(msg->payload, "test client");
        if (!d.ok()) break;
        auto remote = (*node)->Import(msg->from, RegionDescriptor{d->address, d->length, d->rkey});
        if (!remote.ok()) break;
        std::string bytes(d->length, 'p');
        while (true) {
          Op put = (*node)->Put(bytes.data(), bytes.size(), *remote, 0);
          if (!(*node)->Wait(put, Deadline::After(std::chrono::seconds(10))).ok()) break;
        }
        break;
      }
      case testproto::kConnectFlood: {
        std::istringstream in(msg->payload);
        unsigned port = 0;
        size_t count = 0, size = 0;
        in >> port >> count >> size;
        auto to = (*node)->Connect(listen_host, static_cast<uint16_t>(port), Deadline::After(std::chrono::seconds(20)));
        (void)(*node)->SendControl(msg->from, testproto::kEchoReply,
                                   to.ok() ? std::string("connected") : "error: " + to.status().ToString(),
                                   reply_deadline);
        if (to.ok()) {
          Flood(**node, *to, std::to_string(count) + " " + std::to_string(size),
                Deadline::After(std::chrono::seconds(30)));
        }
        break;
      }
      case testproto::kExit:
        return 0;
      default:
        break;
    }
  }
}
