#include "tenax/python/process_group_tenax.h"

#include <ATen/ATen.h>

#include <cstring>

#include "engine.h"

namespace tenax::python {
namespace {

using c10d::OpType;
using c10d::ReduceOp;
using Tensors = std::vector<at::Tensor>;

const char* OpName(ReduceOp::RedOpType op) {
  switch (op) {
    case ReduceOp::SUM: return "sum";
    case ReduceOp::AVG: return "avg";
    case ReduceOp::PRODUCT: return "product";
    case ReduceOp::MIN: return "min";
    case ReduceOp::MAX: return "max";
    case ReduceOp::BAND: return "band";
    case ReduceOp::BOR: return "bor";
    case ReduceOp::BXOR: return "bxor";
    default: return "unsupported";
  }
}

bool SupportedDtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kInt: case at::kLong: case at::kShort: case at::kChar: case at::kByte: case at::kBool:
      return true;
    default:
      return false;
  }
}

// torch's Python name of a dtype ("float32"), else ATen's ("ComplexFloat").
std::string DtypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(t);
  }
}

// "float32[3, 4]"
std::string Describe(const at::Tensor& t) {
  std::string s = DtypeName(t.scalar_type()) + "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

std::string Describe(const Tensors& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? " " : "") + Describe(ts[i]);
  return s;
}

// Why tenax cannot take tensor `i` of a call, or "".
std::string Refusal(const at::Tensor& t, const std::string& which) {
  if (!t.defined()) return which + " is undefined";
  if (!t.device().is_cpu()) {
    return which + " is on " + t.device().str() + "; this tenax build moves CPU tensors only (move it with .cpu())";
  }
  if (t.is_sparse()) return which + " is sparse; tenax moves dense tensors only";
  if (!SupportedDtype(t.scalar_type())) {
    return which + " has dtype " + DtypeName(t.scalar_type()) +
           "; tenax supports float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8 and bool";
  }
  return "";
}

std::string Refusal(const Tensors& ts, const std::string& what) {
  if (ts.empty()) return what + " has no tensor";
  for (size_t i = 0; i < ts.size(); ++i) {
    if (std::string r = Refusal(ts[i], what + " " + std::to_string(i)); !r.empty()) return r;
  }
  return "";
}

std::string OpRefusal(ReduceOp::RedOpType op, const Tensors& ts) {
  const bool bitwise = op == ReduceOp::BAND || op == ReduceOp::BOR || op == ReduceOp::BXOR;
  if (std::string(OpName(op)) == "unsupported") {
    return "reduce op " + std::to_string(static_cast<int>(op)) +
           " is not supported; tenax supports sum, avg, product, min, max, band, bor and bxor";
  }
  for (const at::Tensor& t : ts) {
    if (!t.defined()) continue;
    if (bitwise && at::isFloatingType(t.scalar_type())) return std::string(OpName(op)) + " needs integer or bool tensors";
    if (op == ReduceOp::AVG && !at::isFloatingType(t.scalar_type())) {
      return "avg needs floating-point tensors (" + Describe(t) + " given); use sum and divide";
    }
  }
  return "";
}

std::string RootRefusal(int root, int world) {
  return root >= 0 && root < world ? "" : "root rank " + std::to_string(root) + " is not in 0.." + std::to_string(world - 1);
}

// `lists` must be one list of `world` tensors of `like`'s dtype and shape
// ("output"/"input": what the list holds, `like_name`: what `like` is).
std::string ListRefusal(const std::vector<Tensors>& lists, int world, const std::string& which, const at::Tensor& like,
                        const std::string& like_name) {
  if (lists.size() != 1 || static_cast<int>(lists[0].size()) != world) {
    return "the " + which + " list must hold " + std::to_string(world) + " tensors, one per rank";
  }
  for (size_t i = 0; i < lists[0].size(); ++i) {
    const at::Tensor& t = lists[0][i];
    if (std::string r = Refusal(t, which + " " + std::to_string(i)); !r.empty()) return r;
    if (t.sizes() != like.sizes() || t.scalar_type() != like.scalar_type()) {
      return which + " " + std::to_string(i) + " is " + Describe(t) + ", the " + like_name + " " + Describe(like);
    }
  }
  return "";
}

// What a rank tells the others about its part of a collective.
std::string Part(const std::string& head, const std::string& refusal, const std::string& body) {
  return refusal.empty() ? head + " " + body : head + " refused: " + refusal;
}

std::string BytesOf(const at::Tensor& contiguous) {
  return std::string(static_cast<const char*>(contiguous.data_ptr()), contiguous.nbytes());
}

// A view of received bytes as a tensor like `like` (no copy; `bytes` must outlive it).
Result<at::Tensor> ViewLike(const std::string& bytes, const at::Tensor& like, int from) {
  if (bytes.size() != like.nbytes()) {
    return InvalidArgument("rank " + std::to_string(from) + " sent " + std::to_string(bytes.size()) +
                           " bytes where " + Describe(like) + " needs " + std::to_string(like.nbytes()));
  }
  return at::from_blob(const_cast<char*>(bytes.data()), like.sizes(), like.options());
}

// acc = acc op x, elementwise.
void ReduceInto(at::Tensor& acc, const at::Tensor& x, ReduceOp::RedOpType op) {
  switch (op) {
    case ReduceOp::SUM: case ReduceOp::AVG:
      if (acc.scalar_type() == at::kBool) {
        acc.logical_or_(x);
      } else {
        acc.add_(x);
      }
      break;
    case ReduceOp::PRODUCT:
      if (acc.scalar_type() == at::kBool) {
        acc.logical_and_(x);
      } else {
        acc.mul_(x);
      }
      break;
    case ReduceOp::MIN:
      if (acc.scalar_type() == at::kBool) {
        acc.logical_and_(x);
      } else {
        acc.copy_(at::minimum(acc, x));
      }
      break;
    case ReduceOp::MAX:
      if (acc.scalar_type() == at::kBool) {
        acc.logical_or_(x);
      } else {
        acc.copy_(at::maximum(acc, x));
      }
      break;
    case ReduceOp::BAND: acc.bitwise_and_(x); break;
    case ReduceOp::BOR: acc.bitwise_or_(x); break;
    case ReduceOp::BXOR: acc.bitwise_xor_(x); break;
    default: break;  // refused before
  }
}

// The tensor to work on in place: `t` itself, or a contiguous copy that
// WriteBack returns to it.
struct InPlace {
  explicit InPlace(at::Tensor t) : target(std::move(t)), work(target.is_contiguous() ? target : target.contiguous()) {}
  void WriteBack() {
    if (!work.is_same(target)) target.copy_(work);
  }
  at::Tensor target, work;
};

// Every rank's bytes of `t` reduced in rank order into `t`: the same bits everywhere.
Status ReduceAll(TenaxEngine& e, at::Tensor& t, ReduceOp::RedOpType op, const std::vector<std::string>& parts) {
  at::Tensor acc;
  for (int r = 0; r < e.world(); ++r) {
    TENAX_ASSIGN_OR_RETURN(at::Tensor x, ViewLike(parts[static_cast<size_t>(r)], t, r));
    if (r == 0) {
      acc = x.clone();
    } else {
      ReduceInto(acc, x, op);
    }
  }
  if (op == ReduceOp::AVG) acc.div_(e.world());
  t.copy_(acc);
  return Status();
}

Status AllreduceOne(TenaxEngine& e, const at::Tensor& tensor, ReduceOp::RedOpType op) {
  InPlace t(tensor);
  if (t.work.scalar_type() == at::kFloat && (op == ReduceOp::SUM || op == ReduceOp::AVG) && e.world() > 1) {
    TENAX_RETURN_IF_ERROR(e.FastSum(t.work.data_ptr<float>(), static_cast<size_t>(t.work.numel()),
                                    op == ReduceOp::AVG ? 1.0f / static_cast<float>(e.world()) : 1.0f));
  } else {
    e.CountBulk();
    TENAX_ASSIGN_OR_RETURN(auto parts, e.AllGather(TenaxEngine::kCollectiveKey, BytesOf(t.work)));
    TENAX_RETURN_IF_ERROR(ReduceAll(e, t.work, op, parts));
  }
  t.WriteBack();
  return Status();
}

// Chunk i of `flat` when it holds `n` equal chunks along dimension 0.
at::Tensor Chunk(const at::Tensor& flat, int64_t n, int64_t i) {
  const int64_t each = flat.size(0) / n;
  return flat.narrow(0, i * each, each);
}

}  // namespace

ProcessGroupTenax::ProcessGroupTenax(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size), engine_(std::make_unique<TenaxEngine>(store, rank, size, timeout)) {}

ProcessGroupTenax::~ProcessGroupTenax() = default;

int64_t ProcessGroupTenax::fast_allreduces() const { return engine_->fast(); }
int64_t ProcessGroupTenax::bulk_collectives() const { return engine_->bulk(); }
int64_t ProcessGroupTenax::cross_memory_sums() const { return engine_->cross_memory(); }
std::string ProcessGroupTenax::cross_memory() const { return engine_->cross_memory_state(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) {
  const ReduceOp::RedOpType op = opts.reduceOp;
  std::string refusal = Refusal(tensors, "tensor");
  if (refusal.empty()) refusal = OpRefusal(op, tensors);
  const std::string part = Part(std::string("allreduce ") + OpName(op), refusal, Describe(tensors));
  return engine_->Submit(OpType::ALLREDUCE, "allreduce", tensors, [tensors, op, part](TenaxEngine& e) -> Status {
    TENAX_RETURN_IF_ERROR(e.Agree(part));
    for (const at::Tensor& t : tensors) TENAX_RETURN_IF_ERROR(AllreduceOne(e, t, op));
    return Status();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::allreduce_coalesced(Tensors& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  return allreduce(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) {
  const int root = static_cast<int>(opts.rootRank);
  std::string refusal = Refusal(tensors, "tensor");
  if (refusal.empty()) refusal = RootRefusal(root, size_);
  const std::string part = Part("broadcast from " + std::to_string(root), refusal, Describe(tensors));
  return engine_->Submit(OpType::BROADCAST, "broadcast", tensors, [tensors, root, part](TenaxEngine& e) -> Status {
    TENAX_RETURN_IF_ERROR(e.Agree(part));
    e.CountBulk();
    for (const at::Tensor& tensor : tensors) {
      InPlace t(tensor);
      if (e.rank() == root) {
        const std::string bytes = BytesOf(t.work);
        for (int r = 0; r < e.world(); ++r) {
          if (r != root) TENAX_RETURN_IF_ERROR(e.Send(r, TenaxEngine::kCollectiveKey, bytes));
        }
      } else {
        TENAX_ASSIGN_OR_RETURN(std::string bytes, e.Receive(root, TenaxEngine::kCollectiveKey));
        TENAX_ASSIGN_OR_RETURN(at::Tensor got, ViewLike(bytes, t.work, root));
        t.work.copy_(got);
        t.WriteBack();
      }
    }
    return Status();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::reduce(Tensors& tensors, const c10d::ReduceOptions& opts) {
  const int root = static_cast<int>(opts.rootRank);
  const ReduceOp::RedOpType op = opts.reduceOp;
  std::string refusal = Refusal(tensors, "tensor");
  if (refusal.empty()) refusal = OpRefusal(op, tensors);
  if (refusal.empty()) refusal = RootRefusal(root, size_);
  const std::string part = Part(std::string("reduce ") + OpName(op) + " to " + std::to_string(root), refusal,
                                Describe(tensors));
  return engine_->Submit(OpType::REDUCE, "reduce", tensors, [tensors, root, op, part](TenaxEngine& e) -> Status {
    TENAX_RETURN_IF_ERROR(e.Agree(part));
    e.CountBulk();
    for (const at::Tensor& tensor : tensors) {
      InPlace t(tensor);
      if (e.rank() != root) {
        TENAX_RETURN_IF_ERROR(e.Send(root, TenaxEngine::kCollectiveKey, BytesOf(t.work)));
        continue;
      }
      std::vector<std::string> parts(static_cast<size_t>(e.world()));
      for (int r = 0; r < e.world(); ++r) {
        if (r == root) {
          parts[static_cast<size_t>(r)] = BytesOf(t.work);
        } else {
          TENAX_ASSIGN_OR_RETURN(parts[static_cast<size_t>(r)], e.Receive(r, TenaxEngine::kCollectiveKey));
        }
      }
      TENAX_RETURN_IF_ERROR(ReduceAll(e, t.work, op, parts));
      t.WriteBack();
    }
    return Status();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                                                            const c10d::AllgatherOptions&) {
  std::string refusal = inputs.size() == 1 ? Refusal(inputs, "input") : "pass one input tensor";
  if (refusal.empty()) refusal = ListRefusal(outputs, size_, "output", inputs[0], "input");
  const std::string part = Part("allgather", refusal, inputs.empty() ? "" : Describe(inputs[0]));
  Tensors outs = outputs.empty() ? Tensors{} : outputs[0];
  at::Tensor input = inputs.empty() ? at::Tensor() : inputs[0];
  return engine_->Submit(OpType::ALLGATHER, "allgather", outs, [outs, input, part](TenaxEngine& e) -> Status {
    TENAX_RETURN_IF_ERROR(e.Agree(part));
    e.CountBulk();
    TENAX_ASSIGN_OR_RETURN(auto parts, e.AllGather(TenaxEngine::kCollectiveKey, BytesOf(input.contiguous())));
    for (int r = 0; r < e.world(); ++r) {
      TENAX_ASSIGN_OR_RETURN(at::Tensor got, ViewLike(parts[static_cast<size_t>(r)], input, r));
      outs[static_cast<size_t>(r)].copy_(got);
    }
    return Status();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions&) {
  std::string refusal = Refusal(Tensors{input, output}, "tensor");
  if (refusal.empty() && (output.numel() != input.numel() * size_ || output.scalar_type() != input.scalar_type())) {
    refusal = "the output " + Describe(output) + " must hold " + std::to_string(size_) + " x the input " + Describe(input);
  }
  const std::string part = Part("allgather_base", refusal, input.defined() ? Describe(input) : "");
  return engine_->Submit(OpType::_ALLGATHER_BASE, "allgather", {output}, [output, input, part](TenaxEngine& e) -> Status {
    TENAX_RETURN_IF_ERROR(e.Agree(part));
    e.CountBulk();
    TENAX_ASSIGN_OR_RETURN(auto parts, e.AllGather(TenaxEngine::kCollectiveKey, BytesOf(input.contiguous())));
    InPlace out(output);
    at::Tensor flat = out.work.view({-1});
    for (int r = 0; r < e.world(); ++r) {
      TENAX_ASSIGN_OR_RETURN(at::Tensor got, ViewLike(parts[static_cast<size_t>(r)], input, r));
      Chunk(flat, e.world(), r).copy_(got.reshape({-1}));
    }
    out.WriteBack();
    return Status();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::gather(std::vector<Tensors>& outputs, Tensors& inputs,
                                                         const c10d::GatherOptions& opts) {
  const int root = static_cast<int>(opts.rootRank);
  std::string refusal = RootRefusal(root, size_);
  if (refusal.empty()) refusal = inputs.size() == 1 ? Refusal(inputs, "input") : "pass one input tensor";
  if (refusal.empty() && rank_ == root) refusal = ListRefusal(outputs, size_, "output", inputs[0], "input");
  const std::string part = Part("gather to " + std::to_string(root), refusal, inputs.empty() ? "" : Describe(inputs[0]));
  Tensors outs = rank_ == root && !outputs.empty() ? outputs[0] : Tensors{};
  at::Tensor input = inputs.empty() ? at::Tensor() : inputs[0];
  return engine_->Submit(OpType::GATHER, "gather", outs, [outs, input, root, part](TenaxEngine& e) -> Status {
    TENAX_RETURN_IF_ERROR(e.Agree(part));
    e.CountBulk();
    if (e.rank() != root) return e.Send(root, TenaxEngine::kCollectiveKey, BytesOf(input.contiguous()));
    for (int r = 0; r < e.world(); ++r) {
      if (r == root) {
        outs[static_cast<size_t>(r)].copy_(input);
        continue;
      }
      TENAX_ASSIGN_OR_RETURN(std::string bytes, e.Receive(r, TenaxEngine::kCollectiveKey));
      TENAX_ASSIGN_OR_RETURN(at::Tensor got, ViewLike(bytes, input, r));
      outs[static_cast<size_t>(r)].copy_(got);
    }
    return Status();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const int root = static_cast<int>(opts.rootRank);
  std::string refusal = RootRefusal(root, size_);
  if (refusal.empty()) refusal = outputs.size() == 1 ? Refusal(outputs, "output") : "pass one output tensor";
  if (refusal.empty() && rank_ == root) refusal = ListRefusal(inputs, size_, "input", outputs[0], "output");
  const std::string part = Part("scatter from " + std::to_string(root), refusal, outputs.empty() ? "" : Describe(outputs[0]));
  Tensors ins = rank_ == root && !inputs.empty() ? inputs[0] : Tensors{};
  return engine_->Submit(OpType::SCATTER, "scatter", outputs, [outputs, ins, root, part](TenaxEngine& e) -> Status {
    TENAX_RETURN_IF_ERROR(e.Agree(part));
    e.CountBulk();
    InPlace out(outputs[0]);
    if (e.rank() == root) {
      for (int r = 0; r < e.world(); ++r) {
        if (r == root) {
          out.work.copy_(ins[static_cast<size_t>(r)]);
        } else {
          TENAX_RETURN_IF_ERROR(e.Send(r, TenaxEngine::kCollectiveKey, BytesOf(ins[static_cast<size_t>(r)].contiguous())));
        }
      }
    } else {
      TENAX_ASSIGN_OR_RETURN(std::string bytes, e.Receive(root, TenaxEngine::kCollectiveKey));
      TENAX_ASSIGN_OR_RETURN(at::Tensor got, ViewLike(bytes, out.work, root));
      out.work.copy_(got);
    }
    out.WriteBack();
    return Status();
  });
}

namespace {

// Rank r sends pieces[j] to rank j and reduces what every rank sent it, in rank order.
Status ReduceScatterPieces(TenaxEngine& e, const Tensors& pieces, at::Tensor& output, ReduceOp::RedOpType op) {
  for (int j = 0; j < e.world(); ++j) {
    if (j != e.rank()) {
      TENAX_RETURN_IF_ERROR(e.Send(j, TenaxEngine::kCollectiveKey, BytesOf(pieces[static_cast<size_t>(j)].contiguous())));
    }
  }
  std::vector<std::string> parts(static_cast<size_t>(e.world()));
  for (int r = 0; r < e.world(); ++r) {
    if (r == e.rank()) {
      parts[static_cast<size_t>(r)] = BytesOf(pieces[static_cast<size_t>(r)].contiguous());
    } else {
      TENAX_ASSIGN_OR_RETURN(parts[static_cast<size_t>(r)], e.Receive(r, TenaxEngine::kCollectiveKey));
    }
  }
  InPlace out(output);
  TENAX_RETURN_IF_ERROR(ReduceAll(e, out.work, op, parts));
  out.WriteBack();
  return Status();
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const ReduceOp::RedOpType op = opts.reduceOp;
  std::string refusal = outputs.size() == 1 ? Refusal(outputs, "output") : "pass one output tensor";
  if (refusal.empty()) refusal = OpRefusal(op, outputs);
  if (refusal.empty()) refusal = ListRefusal(inputs, size_, "input", outputs[0], "output");
  const std::string part = Part(std::string("reduce_scatter ") + OpName(op), refusal, outputs.empty() ? "" : Describe(outputs[0]));
  Tensors ins = inputs.empty() ? Tensors{} : inputs[0];
  return engine_->Submit(OpType::REDUCE_SCATTER, "reduce_scatter", outputs,
                         [outputs, ins, op, part](TenaxEngine& e) -> Status {
                           TENAX_RETURN_IF_ERROR(e.Agree(part));
                           e.CountBulk();
                           at::Tensor out = outputs[0];
                           return ReduceScatterPieces(e, ins, out, op);
                         });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  const ReduceOp::RedOpType op = opts.reduceOp;
  std::string refusal = Refusal(Tensors{input, output}, "tensor");
  if (refusal.empty()) refusal = OpRefusal(op, {output});
  if (refusal.empty() && (input.numel() != output.numel() * size_ || output.scalar_type() != input.scalar_type())) {
    refusal = "the input " + Describe(input) + " must hold " + std::to_string(size_) + " x the output " + Describe(output);
  }
  const std::string part = Part(std::string("reduce_scatter_base ") + OpName(op), refusal, output.defined() ? Describe(output) : "");
  return engine_->Submit(OpType::_REDUCE_SCATTER_BASE, "reduce_scatter", {output},
                         [output, input, op, part](TenaxEngine& e) -> Status {
                           TENAX_RETURN_IF_ERROR(e.Agree(part));
                           e.CountBulk();
                           const at::Tensor flat = input.contiguous().view({-1});
                           Tensors pieces;
                           for (int j = 0; j < e.world(); ++j) pieces.push_back(Chunk(flat, e.world(), j).view(output.sizes()));
                           at::Tensor out = output;
                           return ReduceScatterPieces(e, pieces, out, op);
                         });
}

namespace {

// Sends sends[j] to rank j and puts what rank j sent into receives[j] (sizes checked).
Status Exchange(TenaxEngine& e, const Tensors& sends, const Tensors& receives) {
  for (int j = 0; j < e.world(); ++j) {
    if (j != e.rank()) {
      TENAX_RETURN_IF_ERROR(e.Send(j, TenaxEngine::kCollectiveKey, BytesOf(sends[static_cast<size_t>(j)].contiguous())));
    }
  }
  for (int r = 0; r < e.world(); ++r) {
    at::Tensor dst = receives[static_cast<size_t>(r)];
    if (r == e.rank()) {
      dst.copy_(sends[static_cast<size_t>(r)]);
      continue;
    }
    TENAX_ASSIGN_OR_RETURN(std::string bytes, e.Receive(r, TenaxEngine::kCollectiveKey));
    TENAX_ASSIGN_OR_RETURN(at::Tensor got, ViewLike(bytes, dst.contiguous(), r));
    dst.copy_(got);
  }
  return Status();
}

// `flat`'s dimension-0 split by `sizes` (equal parts when empty).
Tensors Split(const at::Tensor& t, const std::vector<int64_t>& sizes, int64_t world) {
  Tensors out;
  int64_t at = 0;
  for (int64_t j = 0; j < world; ++j) {
    const int64_t n = sizes.empty() ? t.size(0) / world : sizes[static_cast<size_t>(j)];
    out.push_back(t.narrow(0, at, n));
    at += n;
  }
  return out;
}

std::string SplitRefusal(const at::Tensor& t, const std::vector<int64_t>& sizes, int world, const std::string& which) {
  if (t.dim() == 0) return which + " has no dimension to split";
  if (sizes.empty()) {
    return t.size(0) % world == 0 ? "" : which + "'s first dimension " + std::to_string(t.size(0)) +
                                             " does not split into " + std::to_string(world) + " equal parts";
  }
  if (static_cast<int>(sizes.size()) != world) return which + " split sizes name " + std::to_string(sizes.size()) + " parts";
  int64_t sum = 0;
  for (int64_t s : sizes) sum += s;
  return sum == t.size(0) ? "" : which + " split sizes add up to " + std::to_string(sum) + ", not " + std::to_string(t.size(0));
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& output_split_sizes,
                                                                std::vector<int64_t>& input_split_sizes,
                                                                const c10d::AllToAllOptions&) {
  std::string refusal = Refusal(Tensors{input, output}, "tensor");
  if (refusal.empty() && input.scalar_type() != output.scalar_type()) refusal = "input and output dtypes differ";
  if (refusal.empty()) refusal = SplitRefusal(input, input_split_sizes, size_, "the input");
  if (refusal.empty()) refusal = SplitRefusal(output, output_split_sizes, size_, "the output");
  const std::string part = Part("alltoall", refusal, input.defined() ? DtypeName(input.scalar_type()) : "");
  const std::vector<int64_t> in_sizes = input_split_sizes, out_sizes = output_split_sizes;
  return engine_->Submit(OpType::ALLTOALL_BASE, "alltoall", {output},
                         [output, input, in_sizes, out_sizes, part](TenaxEngine& e) -> Status {
                           TENAX_RETURN_IF_ERROR(e.Agree(part));
                           e.CountBulk();
                           InPlace out(output);
                           TENAX_RETURN_IF_ERROR(Exchange(e, Split(input, in_sizes, e.world()),
                                                          Split(out.work, out_sizes, e.world())));
                           out.WriteBack();
                           return Status();
                         });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::alltoall(Tensors& outputs, Tensors& inputs,
                                                           const c10d::AllToAllOptions&) {
  std::string refusal = static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_
                            ? Refusal(inputs, "input")
                            : "pass " + std::to_string(size_) + " input and output tensors";
  if (refusal.empty()) refusal = Refusal(outputs, "output");
  const std::string part = Part("alltoall list", refusal, inputs.empty() ? "" : DtypeName(inputs[0].scalar_type()));
  return engine_->Submit(OpType::ALLTOALL, "alltoall", outputs, [outputs, inputs, part](TenaxEngine& e) -> Status {
    TENAX_RETURN_IF_ERROR(e.Agree(part));
    e.CountBulk();
    return Exchange(e, inputs, outputs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::send(Tensors& tensors, int dst_rank, int tag) {
  const std::string refusal = Refusal(tensors, "tensor");
  TORCH_CHECK(refusal.empty(), "tenax backend, rank ", rank_, ", send: ", refusal);
  TORCH_CHECK(dst_rank >= 0 && dst_rank < size_ && dst_rank != rank_, "tenax backend, rank ", rank_,
              ", send: destination rank ", dst_rank, " is not another rank of 0..", size_ - 1);
  const std::string head = Describe(tensors[0]) + "\n";
  return engine_->Submit(OpType::SEND, "send to rank " + std::to_string(dst_rank), tensors,
                         [tensors, dst_rank, tag, head](TenaxEngine& e) -> Status {
                           e.CountBulk();
                           return e.Send(dst_rank, TenaxEngine::P2pKey(tag), head + BytesOf(tensors[0].contiguous()));
                         });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::recv(Tensors& tensors, int src_rank, int tag) {
  const std::string refusal = Refusal(tensors, "tensor");
  TORCH_CHECK(refusal.empty(), "tenax backend, rank ", rank_, ", recv: ", refusal);
  TORCH_CHECK(src_rank >= 0 && src_rank < size_ && src_rank != rank_, "tenax backend, rank ", rank_,
              ", recv: source rank ", src_rank, " is not another rank of 0..", size_ - 1);
  const std::string want = Describe(tensors[0]);
  return engine_->Submit(OpType::RECV, "recv from rank " + std::to_string(src_rank), tensors,
                         [tensors, src_rank, tag, want](TenaxEngine& e) -> Status {
                           e.CountBulk();
                           TENAX_ASSIGN_OR_RETURN(std::string m, e.Receive(src_rank, TenaxEngine::P2pKey(tag)));
                           const size_t nl = m.find('\n');
                           const std::string sent = nl == std::string::npos ? "?" : m.substr(0, nl);
                           if (sent != want) {
                             return InvalidArgument("rank " + std::to_string(src_rank) + " sent " + sent +
                                                    " where this rank receives " + want);
                           }
                           InPlace t(tensors[0]);
                           const std::string body = m.substr(nl + 1);
                           TENAX_ASSIGN_OR_RETURN(at::Tensor got, ViewLike(body, t.work, src_rank));
                           t.work.copy_(got);
                           t.WriteBack();
                           return Status();
                         });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTenax::barrier(const c10d::BarrierOptions&) {
  // Every rank hears from every other: the agreement is the barrier.
  return engine_->Submit(OpType::BARRIER, "barrier", {}, [](TenaxEngine& e) -> Status { return e.Agree("barrier"); });
}

c10::intrusive_ptr<c10d::ProcessGroup> CreateProcessGroupTenax(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                               int size, std::chrono::duration<float> timeout) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return c10::make_intrusive<ProcessGroupTenax>(store, rank, size, ms);
}

}  // namespace tenax::python
