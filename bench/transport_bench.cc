// tenax bench transport: moves tensors between two processes on this machine
// with the planned one-sided path (tenax), the same tensors as serialised
// messages over the same UCX connection copied out on receipt (tenax_rpc),
// and gRPC (one protobuf message per tensor over TCP), and compares them with
// a one-process memcpy of the same bytes.
//
// The parent is the sender; it starts `tenax-bench transport-peer` (the
// receiver) once per UCX transport and drives it with control messages.
// Every timed iteration ends when the receiver has the data in usable memory
// and the sender has heard so (one small message back), for every mode.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

#include "bench_common.h"
#include "cli_app.h"
#include "grpc_peer.h"
#include "tenax/net/message_kinds.h"
#include "tenax/comm/buffer_plan.h"
#include "tenax/comm/tensor_channel.h"
#include "tenax/core/files.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/control_codec.h"
#include "tenax/net/node.h"

namespace tenax::bench {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kRunKind = net::KindValue(net::MessageKind::kBenchRun);   // sender -> receiver: "mode workload iterations"
constexpr uint32_t kDoneKind = net::KindValue(net::MessageKind::kBenchDone);  // receiver -> sender: an iteration's data is usable
constexpr uint32_t kReadyKind = net::KindValue(net::MessageKind::kBenchReady);

struct Workload {
  std::string name;
  std::vector<comm::TensorSpec> tensors;
  size_t bytes() const {
    size_t b = 0;
    for (const auto& t : tensors) b += t.nbytes();
    return b;
  }
};

Result<Workload> LoadShapesFile(const std::string& path, const std::string& name) {
  TENAX_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, 1 << 20));
  Workload w{name, {}};
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    comm::TensorSpec spec;
    ls >> spec.name;
    int64_t d;
    while (ls >> d) spec.shape.push_back(d);
    if (spec.shape.empty() || !ls.eof())
      return InvalidArgument(path + ":" + std::to_string(lineno) + ": expected 'name d1 d2 ...'");
    w.tensors.push_back(std::move(spec));
  }
  return w;
}

Result<std::vector<Workload>> Workloads(const std::string& shapes_path) {
  std::vector<Workload> out;
  for (auto [name, floats] :
       {std::pair<const char*, int64_t>{"4KiB", 1024}, {"256KiB", 64 << 10}, {"4MiB", 1 << 20}, {"64MiB", 16 << 20}}) {
    out.push_back({name, {{"t", comm::DType::kFloat32, {floats}}}});
  }
  TENAX_ASSIGN_OR_RETURN(Workload resnet, LoadShapesFile(shapes_path, "resnet50"));
  out.push_back(std::move(resnet));
  return out;
}

int Iterations(const Workload& w, bool quick) {
  size_t b = w.bytes();
  int n = b <= (256 << 10) ? 400 : b <= (4 << 20) ? 60 : 12;
  return quick ? std::max(5, n / 3) : n;
}

// Receiver-side RPC message: tensor index, then the bytes.
std::string EncodeRpcTensor(uint32_t index, const uint8_t* data, size_t size) {
  wire::User m;  // reuse a protobuf with a kind and a bytes field: a real serialisation
  m.set_kind(index);
  m.set_payload(reinterpret_cast<const char*>(data), size);
  return m.SerializeAsString();
}

// ------------------------------------------------------------ the receiver

Status ServeRun(net::Node& node, net::PeerId peer, const std::string& mode, const Workload& w, int iterations) {
  TENAX_ASSIGN_OR_RETURN(comm::BufferPlan plan, comm::PlanBuffers(w.tensors));
  const Deadline deadline = Deadline::After(300s);
  if (mode == "tenax") {
    TENAX_ASSIGN_OR_RETURN(auto rx, comm::TensorReceiver::Open(node, peer, plan, deadline));
    for (int it = 1; it <= iterations; ++it) {
      TENAX_RETURN_IF_ERROR(rx->WaitStep(it, deadline));
      TENAX_RETURN_IF_ERROR(rx->Release(it, deadline));  // the data is usable in place: tell the sender
    }
    return Status::Ok();
  }
  if (mode == "tenax_rpc") {
    std::vector<uint8_t> dest(plan.total_bytes);
    TENAX_RETURN_IF_ERROR(node.SendControl(peer, kReadyKind, "", deadline));
    for (int it = 1; it <= iterations; ++it) {
      for (size_t t = 0; t < plan.tensors.size(); ++t) {
        TENAX_ASSIGN_OR_RETURN(net::BulkMessage msg, node.ReceiveBulk(deadline, peer));  // copied out of UCX
        wire::User m;
        if (!m.ParseFromArray(msg.data.data(), static_cast<int>(msg.data.size())) || m.kind() >= plan.tensors.size() ||
            m.payload().size() != plan.tensors[m.kind()].nbytes) {
          return ProtocolError("bad RPC tensor message");
        }
        std::memcpy(dest.data() + plan.tensors[m.kind()].offset, m.payload().data(), m.payload().size());
      }
      TENAX_RETURN_IF_ERROR(node.SendControl(peer, kDoneKind, std::to_string(it), deadline));
    }
    return Status::Ok();
  }
  return InvalidArgument("unknown mode " + mode);
}

Status RunTransportPeer(const std::string& transports, const std::string& shapes, int tcp_streams) {
  TENAX_ASSIGN_OR_RETURN(std::vector<Workload> workloads, Workloads(shapes));
  net::NodeOptions o;
  o.name = "bench-receiver";
  o.transports = transports;
  o.tcp_streams = tcp_streams;
  o.net_devices = "lo";
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(o));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen("127.0.0.1", 0));
  TENAX_ASSIGN_OR_RETURN(auto grpc, GrpcSinkServer::Start());
  std::printf("PORT %u %u\n", static_cast<unsigned>(port), static_cast<unsigned>(grpc->port()));
  std::fflush(stdout);
  TENAX_ASSIGN_OR_RETURN(net::PeerId peer, node->Accept(Deadline::After(60s)));
  while (true) {
    TENAX_ASSIGN_OR_RETURN(net::ControlMessage msg, node->ReceiveControl(Deadline::After(600s), peer, kRunKind));
    std::istringstream in(msg.payload);
    std::string mode, name;
    int iterations = 0;
    in >> mode >> name >> iterations;
    if (mode == "exit") return Status::Ok();
    auto w = std::find_if(workloads.begin(), workloads.end(), [&](const Workload& x) { return x.name == name; });
    if (w == workloads.end()) return InvalidArgument("unknown workload " + name);
    TENAX_RETURN_IF_ERROR(ServeRun(*node, peer, mode, *w, iterations));
  }
}

// -------------------------------------------------------------- the sender

struct Measurement {
  std::vector<double> seconds;  // per timed iteration
};

Result<Measurement> MeasureTenax(net::Node& node, net::PeerId peer, const Workload& w, int iterations, int warmup) {
  TENAX_ASSIGN_OR_RETURN(comm::BufferPlan plan, comm::PlanBuffers(w.tensors));
  const Deadline deadline = Deadline::After(300s);
  TENAX_ASSIGN_OR_RETURN(auto tx, comm::TensorSender::Open(node, peer, plan, deadline));
  for (size_t i = 0; i < plan.data_bytes; ++i) tx->arena()[i] = static_cast<uint8_t>(i);
  Measurement m;
  for (int it = 1; it <= iterations; ++it) {
    auto t0 = SteadyClock::now();
    TENAX_RETURN_IF_ERROR(tx->SendStep(it, deadline));
    TENAX_RETURN_IF_ERROR(tx->WaitReleased(it, deadline));
    if (it > warmup) m.seconds.push_back(Seconds(SteadyClock::now() - t0).count());
  }
  return m;
}

Result<Measurement> MeasureRpc(net::Node& node, net::PeerId peer, const Workload& w, int iterations, int warmup) {
  TENAX_ASSIGN_OR_RETURN(comm::BufferPlan plan, comm::PlanBuffers(w.tensors));
  const Deadline deadline = Deadline::After(300s);
  std::vector<uint8_t> source(plan.total_bytes);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i);
  TENAX_RETURN_IF_ERROR(node.ReceiveControl(deadline, peer, kReadyKind).status());
  Measurement m;
  std::vector<std::string> messages(plan.tensors.size());
  for (int it = 1; it <= iterations; ++it) {
    auto t0 = SteadyClock::now();
    std::vector<net::Op> ops;
    for (size_t t = 0; t < plan.tensors.size(); ++t) {
      messages[t] =
          EncodeRpcTensor(static_cast<uint32_t>(t), source.data() + plan.tensors[t].offset, plan.tensors[t].nbytes);
      ops.push_back(node.StartBulk(peer, messages[t].data(), messages[t].size()));
    }
    TENAX_RETURN_IF_ERROR(node.WaitAll(ops, deadline));
    TENAX_RETURN_IF_ERROR(node.ReceiveControl(deadline, peer, kDoneKind).status());
    if (it > warmup) m.seconds.push_back(Seconds(SteadyClock::now() - t0).count());
  }
  return m;
}

Result<Measurement> MeasureGrpc(uint16_t port, const Workload& w, int iterations, int warmup) {
  TENAX_ASSIGN_OR_RETURN(comm::BufferPlan plan, comm::PlanBuffers(w.tensors));
  std::vector<uint8_t> source(plan.total_bytes);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i);
  std::vector<GrpcPusher::Tensor> tensors;
  for (const auto& t : plan.tensors) tensors.push_back({source.data() + t.offset, t.nbytes, t.offset});
  TENAX_ASSIGN_OR_RETURN(auto pusher, GrpcPusher::Connect(port));
  Measurement m;
  for (int it = 1; it <= iterations; ++it) {
    auto t0 = SteadyClock::now();
    TENAX_RETURN_IF_ERROR(pusher->Push(tensors));
    if (it > warmup) m.seconds.push_back(Seconds(SteadyClock::now() - t0).count());
  }
  return m;
}

double MemcpyGbps(size_t bytes, int reps) {
  std::vector<uint8_t> a(bytes, 1), b(bytes, 0);
  std::vector<double> s;
  for (int r = 0; r < reps + 1; ++r) {
    auto t0 = SteadyClock::now();
    std::memcpy(b.data(), a.data(), bytes);
    double dt = Seconds(SteadyClock::now() - t0).count();
    if (r > 0) s.push_back(dt);  // first touch excluded
  }
  volatile uint8_t sink = b[bytes / 2];
  (void)sink;
  return bytes * 8 / Median(s) / 1e9;
}

struct BenchArgs {
  bool quick = false;
  std::string json_path;
  std::string shapes = BenchFile("resnet50_shapes.txt");
  int tcp_streams = 1;  // data connections per peer in the TCP runs
};

Status RunBenchTransport(const BenchArgs& a) {
  TENAX_ASSIGN_OR_RETURN(std::vector<Workload> workloads, Workloads(a.shapes));
  UseFreshSecret();  // for both Nodes
  TENAX_ASSIGN_OR_RETURN(const std::string bench_bin, SelfExe());
  const int warmup = 2;

  nlohmann::json results = nlohmann::json::array();
  const double memcpy_gbps = MemcpyGbps(64 << 20, a.quick ? 10 : 30);
  spdlog::info("memcpy of 64 MiB: {:.1f} Gb/s", memcpy_gbps);
  bool grpc_done = false;
  for (auto [transport, tls] : {std::pair<const char*, const char*>{"shm", ""}, {"tcp", "tcp"}}) {
    PeerGroup receiver;
    TENAX_RETURN_IF_ERROR(receiver.Start(std::string("transport peer (") + transport + ")",
                                         {bench_bin, "transport-peer", "--transports", tls, "--shapes", a.shapes,
                                          "--tcp-streams", std::to_string(a.tcp_streams)}));
    unsigned ucx_port = 0, grpc_port = 0;
    TENAX_RETURN_IF_ERROR(receiver  // libraries may print on stdout too: look for our line
                              .WaitForLine(
                                  0,
                                  [&](const std::string& line) {
                                    return std::sscanf(line.c_str(), "PORT %u %u", &ucx_port, &grpc_port) == 2;
                                  },
                                  Deadline::After(60s))
                              .status());
    net::NodeOptions o;
    o.name = "bench-sender";
    o.transports = tls;
    o.tcp_streams = a.tcp_streams;
    o.net_devices = "lo";
    TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(o));
    TENAX_ASSIGN_OR_RETURN(net::PeerId peer,
                           node->Connect("127.0.0.1", static_cast<uint16_t>(ucx_port), Deadline::After(30s)));
    for (const auto& w : workloads) {
      const int iterations = Iterations(w, a.quick) + warmup;
      std::vector<std::string> modes = {"tenax", "tenax_rpc"};
      if (!grpc_done) modes.push_back("grpc");  // gRPC runs over TCP whatever UCX uses
      for (const auto& mode : modes) {
        if (StopRequested()) return Cancelled("benchmark stopped");
        Result<Measurement> m = Internal("unreached");
        if (mode == "grpc") {
          m = MeasureGrpc(static_cast<uint16_t>(grpc_port), w, iterations, warmup);
        } else {
          TENAX_RETURN_IF_ERROR(node->SendControl(
              peer, kRunKind, mode + " " + w.name + " " + std::to_string(iterations), Deadline::After(30s)));
          m = mode == "tenax" ? MeasureTenax(*node, peer, w, iterations, warmup)
                              : MeasureRpc(*node, peer, w, iterations, warmup);
        }
        if (!m.ok()) return m.status().WithContext(mode + "/" + transport + "/" + w.name);
        const double seconds = Median(m->seconds);
        const double gbps = w.bytes() * 8 / seconds / 1e9;
        const char* reported_transport = mode == "grpc" ? "tcp" : transport;
        spdlog::info("{:>9} {:>10} {:>4}: {:10.6f} s  {:8.2f} Gb/s", w.name, mode, reported_transport, seconds, gbps);
        results.push_back({{"workload", w.name},
                           {"mode", mode},
                           {"transport", reported_transport},
                           {"seconds", seconds},
                           {"gbps", gbps},
                           {"bytes", w.bytes()},
                           {"tensors", w.tensors.size()},
                           {"iterations", m->seconds.size()}});
      }
    }
    grpc_done = true;
    TENAX_RETURN_IF_ERROR(node->SendControl(peer, kRunKind, "exit x 0", Deadline::After(10s)));
    node->Disconnect(peer, Deadline::After(2s));
    TENAX_RETURN_IF_ERROR(receiver.Wait(Deadline::After(30s)));
  }

  auto find = [&](const std::string& w, const std::string& mode, const std::string& tr) {
    for (const auto& r : results) {
      if (r["workload"] == w && r["mode"] == mode && r["transport"] == tr) return r["seconds"].get<double>();
    }
    return 0.0;
  };
  nlohmann::json ratios = nlohmann::json::object();
  for (const char* w : {"64MiB", "resnet50"}) {
    const double shm = find(w, "tenax", "shm"), tcp = find(w, "tenax", "tcp"), grpc = find(w, "grpc", "tcp");
    const double bytes = w == std::string("64MiB") ? double(64 << 20) : double(workloads.back().bytes());
    ratios[w] = {{"tenax_shm_over_memcpy", bytes * 8 / shm / 1e9 / memcpy_gbps},
                 {"grpc_over_tenax_shm", grpc / shm},
                 {"tenax_rpc_over_tenax_shm", find(w, "tenax_rpc", "shm") / shm},
                 {"tenax_rpc_over_tenax_tcp", find(w, "tenax_rpc", "tcp") / tcp},
                 {"grpc_over_tenax_tcp", grpc / tcp}};
  }
  nlohmann::json out = {{"benchmark", "transport"},
                        {"quick", a.quick},
                        {"tcp_streams", a.tcp_streams},
                        {"memcpy_gbps", memcpy_gbps},
                        {"latency_4KiB_one_way_seconds", find("4KiB", "tenax", "shm") / 2},
                        {"latency_4KiB_one_way_seconds_tcp", find("4KiB", "tenax", "tcp") / 2},
                        {"speedups", ratios},
                        {"results", results}};
  std::printf("%s\n", out["speedups"].dump(2).c_str());
  return WriteJsonReport(a.json_path, out);
}

}  // namespace

void AddTransportBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "transport", "Planned one-sided transfers vs serialised messages (same UCX) vs gRPC, two processes",
      "Fewer iterations (under 3 minutes)", a->quick, a->json_path, [a] { return RunBenchTransport(*a); }, exit_code);
  cmd->add_option("--shapes", a->shapes, "ResNet-50 tensor shapes file")->capture_default_str();
  cmd->add_option("--tcp-streams", a->tcp_streams, "Data connections per peer for the TCP runs (net.tcp_streams)")
      ->check(CLI::Range(1, net::kMaxTcpStreams))
      ->capture_default_str();

  auto peer_transports = std::make_shared<std::string>();
  auto peer_shapes = std::make_shared<std::string>(a->shapes);
  auto peer_streams = std::make_shared<int>(1);
  CLI::App* peer = bench.add_subcommand("transport-peer", "The receiving process of 'bench transport' (internal)");
  peer->group("");  // hidden from --help
  peer->add_option("--transports", *peer_transports, "UCX transports");
  peer->add_option("--shapes", *peer_shapes, "ResNet-50 tensor shapes file");
  peer->add_option("--tcp-streams", *peer_streams, "Data connections per peer over TCP");
  peer->callback([peer_transports, peer_shapes, peer_streams, &exit_code] {
    InitLogging("bench-peer");
    const Status st = RunTransportPeer(*peer_transports, *peer_shapes, *peer_streams);
    exit_code = st.ok() ? 0 : cli::ReportError("bench transport-peer", st);
  });
}

}  // namespace tenax::bench
