// Planned channels between two Nodes, each driven by its own thread (the
// Node's threading rule), over shared memory and forced TCP.
#include "tenax/comm/tensor_channel.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "testing.h"

namespace tenax::comm {
namespace {

using namespace std::chrono_literals;
constexpr const char* kSecret = "channel-test-secret-0123456789";
// Teardown handshake: the sender says bye when done, the receiver answers
// once it has finished too, so neither side closes while the other still
// has operations in flight (a closed peer is, correctly, a lost peer).
constexpr uint32_t kBye = 0x7f00, kByeAck = 0x7f01;

net::NodeOptions Options(const char* name, const char* transports) {
  net::NodeOptions o;
  o.name = name;
  o.secret = kSecret;
  o.transports = transports;
  o.net_devices = "lo";
  return o;
}

uint8_t Value(uint64_t step, size_t tensor, size_t i) { return static_cast<uint8_t>(step * 31 + tensor * 7 + i); }

class ChannelTest : public ::testing::TestWithParam<const char*> {
 protected:
  // Runs `receiver` on a thread with its own Node; returns its Status.
  // `sender` runs here once the receiver listens.
  void RunPair(const std::function<Status(net::Node&, net::PeerId)>& receiver,
               const std::function<Status(net::Node&, net::PeerId)>& sender, Status* receiver_status,
               Status* sender_status) {
    std::promise<uint16_t> port_promise;
    auto port_future = port_promise.get_future();
    std::thread t([&] {
      auto node = net::Node::Create(Options("receiver", GetParam()));
      if (!node.ok()) {
        *receiver_status = node.status();
        port_promise.set_value(0);
        return;
      }
      auto port = (*node)->Listen("127.0.0.1", 0);
      port_promise.set_value(port.ok() ? *port : 0);
      if (!port.ok()) {
        *receiver_status = port.status();
        return;
      }
      auto peer = (*node)->Accept(Deadline::After(20s));
      *receiver_status = peer.ok() ? receiver(**node, *peer) : peer.status();
      if (peer.ok() && receiver_status->ok()) {
        *receiver_status = (*node)->ReceiveControl(Deadline::After(20s), *peer, kBye).status();
        if (receiver_status->ok()) *receiver_status = (*node)->SendControl(*peer, kByeAck, "", Deadline::After(20s));
      }
    });
    uint16_t port = port_future.get();
    auto node = net::Node::Create(Options("sender", GetParam()));
    if (port == 0 || !node.ok()) {
      *sender_status = Internal("setup failed");
    } else {
      auto peer = (*node)->Connect("127.0.0.1", port, Deadline::After(20s));
      *sender_status = peer.ok() ? sender(**node, *peer) : peer.status();
      if (peer.ok() && sender_status->ok()) {
        *sender_status = (*node)->SendControl(*peer, kBye, "", Deadline::After(20s));
        if (sender_status->ok()) {
          *sender_status = (*node)->ReceiveControl(Deadline::After(20s), *peer, kByeAck).status();
        }
      }
    }
    t.join();
  }
};

std::vector<TensorSpec> Specs() {
  return {{"conv.weight", DType::kFloat32, {16, 1, 5, 5}},
          {"conv.bias", DType::kFloat32, {16}},
          {"fc.weight", DType::kFloat32, {300, 1000}},
          {"steps", DType::kInt64, {1}}};
}

TEST_P(ChannelTest, StepsArriveInPlaceAndInOrder) {
  constexpr uint64_t kSteps = 20;
  ASSERT_OK_AND_ASSIGN(const BufferPlan plan, PlanBuffers(Specs()));
  Status rs, ss;
  RunPair(
      [&](net::Node& node, net::PeerId peer) -> Status {
        TENAX_ASSIGN_OR_RETURN(auto rx, TensorReceiver::Open(node, peer, plan, Deadline::After(20s)));
        for (uint64_t step = 1; step <= kSteps; ++step) {
          TENAX_RETURN_IF_ERROR(rx->WaitStep(step, Deadline::After(20s)));
          for (size_t t = 0; t < plan.tensors.size(); ++t) {
            const uint8_t* d = rx->data(t);
            for (size_t i = 0; i < plan.tensors[t].nbytes; ++i) {  // every byte of every step
              if (d[i] != Value(step, t, i)) {
                return DataLoss("step " + std::to_string(step) + " tensor " + std::to_string(t) + " byte " +
                                std::to_string(i));
              }
            }
          }
          TENAX_RETURN_IF_ERROR(rx->Release(step, Deadline::After(20s)));
        }
        return Status::Ok();
      },
      [&](net::Node& node, net::PeerId peer) -> Status {
        TENAX_ASSIGN_OR_RETURN(auto tx, TensorSender::Open(node, peer, plan, Deadline::After(20s)));
        for (uint64_t step = 1; step <= kSteps; ++step) {
          if (step > 1) TENAX_RETURN_IF_ERROR(tx->WaitReleased(step - 1, Deadline::After(20s)));
          for (size_t t = 0; t < plan.tensors.size(); ++t) {
            uint8_t* d = tx->data(t);
            for (size_t i = 0; i < plan.tensors[t].nbytes; ++i) d[i] = Value(step, t, i);
          }
          TENAX_RETURN_IF_ERROR(tx->SendStep(step, Deadline::After(20s)));
        }
        return tx->WaitReleased(kSteps, Deadline::After(20s));
      },
      &rs, &ss);
  EXPECT_OK(rs);
  EXPECT_OK(ss);
}

TEST_P(ChannelTest, DifferentPlansAreRefusedBeforeAnyData) {
  ASSERT_OK_AND_ASSIGN(const BufferPlan plan_a, PlanBuffers(Specs()));
  auto specs = Specs();
  specs[2].shape = {300, 999};
  ASSERT_OK_AND_ASSIGN(const BufferPlan plan_b, PlanBuffers(specs));
  Status rs, ss;
  RunPair([&](net::Node& node,
              net::PeerId peer) { return TensorReceiver::Open(node, peer, plan_a, Deadline::After(20s)).status(); },
          [&](net::Node& node, net::PeerId peer) {
            return TensorSender::Open(node, peer, plan_b, Deadline::After(20s)).status();
          },
          &rs, &ss);
  EXPECT_EQ(rs.code(), StatusCode::kFailedPrecondition) << rs.ToString();
  EXPECT_EQ(ss.code(), StatusCode::kFailedPrecondition) << ss.ToString();
  // Each side names the mismatch with both fingerprints.
  for (const Status* st : {&rs, &ss}) {
    EXPECT_NE(st->message().find("planned different tensors"), std::string::npos) << st->ToString();
  }
  EXPECT_NE(rs.message().find("fingerprint " + std::to_string(plan_b.fingerprint) + ", ours " +
                              std::to_string(plan_a.fingerprint)),
            std::string::npos)
      << rs.ToString();
  EXPECT_NE(ss.message().find("fingerprint " + std::to_string(plan_a.fingerprint) + ", ours " +
                              std::to_string(plan_b.fingerprint)),
            std::string::npos)
      << ss.ToString();
}

TEST_P(ChannelTest, DynamicTensorsAreReadOneSided) {
  ASSERT_OK_AND_ASSIGN(const BufferPlan plan, PlanBuffers({{"w", DType::kFloat32, {4}}}));
  std::vector<std::vector<int64_t>> shapes = {{3, 5}, {0}, {1000, 17}};
  Status rs, ss;
  std::vector<std::vector<int64_t>> received;
  RunPair(
      [&](net::Node& node, net::PeerId peer) -> Status {
        TENAX_ASSIGN_OR_RETURN(auto rx, TensorReceiver::Open(node, peer, plan, Deadline::After(20s)));
        for (size_t k = 0; k < shapes.size(); ++k) {
          std::vector<int64_t> buf;
          TENAX_ASSIGN_OR_RETURN(TensorSpec spec, rx->ReceiveDynamic(
                                                      [&](const TensorSpec& s, size_t bytes) -> void* {
                                                        buf.resize(bytes / sizeof(int64_t));
                                                        (void)s;
                                                        return buf.data();
                                                      },
                                                      Deadline::After(20s)));
          if (spec.shape != shapes[k]) return DataLoss("wrong shape for tensor " + std::to_string(k));
          if (static_cast<int64_t>(buf.size()) != spec.numel()) {
            return DataLoss("tensor " + std::to_string(k) + ": " + std::to_string(buf.size()) + " elements for " +
                            std::to_string(spec.numel()));
          }
          for (size_t i = 0; i < buf.size(); ++i) {
            if (buf[i] != static_cast<int64_t>(i * (k + 1))) {
              return DataLoss("tensor " + std::to_string(k) + " element " + std::to_string(i) + " is " +
                              std::to_string(buf[i]));
            }
          }
          received.push_back(spec.shape);
        }
        return Status::Ok();
      },
      [&](net::Node& node, net::PeerId peer) -> Status {
        TENAX_ASSIGN_OR_RETURN(auto tx, TensorSender::Open(node, peer, plan, Deadline::After(20s)));
        for (size_t k = 0; k < shapes.size(); ++k) {
          TensorSpec spec{"ids", DType::kInt64, shapes[k], true};
          std::vector<int64_t> values(spec.numel());
          for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i * (k + 1));
          TENAX_RETURN_IF_ERROR(tx->SendDynamic(spec, values.data(), values.size() * 8, Deadline::After(20s)));
        }
        // A wrong byte count is refused locally.
        TensorSpec bad{"ids", DType::kInt64, {2}, true};
        int64_t two[2] = {};
        if (tx->SendDynamic(bad, two, 8, Deadline::After(1s)).code() != StatusCode::kInvalidArgument) {
          return Internal("mismatched dynamic size was accepted");
        }
        return Status::Ok();
      },
      &rs, &ss);
  EXPECT_OK(rs);
  EXPECT_OK(ss);
  EXPECT_EQ(received, shapes);
}

INSTANTIATE_TEST_SUITE_P(Transports, ChannelTest, ::testing::Values("", "tcp"),
                         [](const auto& info) { return std::string(*info.param ? info.param : "shm"); });

}  // namespace
}  // namespace tenax::comm
