//===- RefDevice.cpp - the fp32 reference interpreter ---------------------===//
#include "reference/RefDevice.h"
#include "ir/KilnOps.h"

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln {
namespace {

/// A value during interpretation: float32 data, or int32 data for the i32
/// token and position tensors. Weights share their converted buffers.
struct Tensor {
  std::vector<int64_t> shape;
  std::shared_ptr<const std::vector<float>> data;
  std::vector<int32_t> ints;

  const float *f() const { return data->data(); }
  int64_t dim(int i) const { return shape[i]; }
};

Tensor floats(std::vector<int64_t> shape, std::vector<float> values) {
  return {std::move(shape),
          std::make_shared<const std::vector<float>>(std::move(values)),
          {}};
}

std::string where(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName() << " at " << op->getLoc();
  return s;
}

absl::Status opError(Operation *op, const std::string &what) {
  return absl::InvalidArgumentError(
      absl::StrCat("ref device: ", where(op), ": ", what));
}

/// out[S, N] = x[S, K] · w[N, K]ᵀ, accumulated in float32.
std::vector<float> matmulT(const Tensor &x, const Tensor &w) {
  int64_t s = x.dim(0), k = x.dim(1), n = w.dim(0);
  std::vector<float> out(s * n); // [S, N]
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float *a = x.f() + i * k, *b = w.f() + j * k;
      float acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += a[t] * b[t];
      out[i * n + j] = acc;
    }
  return out;
}

/// Every kv_write updates the one cache in place, which is right only when
/// each other reader of its cache operand runs before it.
LogicalResult checkCacheOrder(func::FuncOp fn, std::string &error) {
  WalkResult r = fn.walk([&](KVWriteOp write) {
    for (Operation *user : write.getCache().getUsers())
      if (user != write.getOperation() && !user->isBeforeInBlock(write)) {
        error = absl::StrCat("ref device: ", where(user),
                             " reads a cache value after a kv_write replaced "
                             "it; the reference device updates the cache in "
                             "place");
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

} // namespace

absl::StatusOr<std::unique_ptr<RefDevice>>
RefDevice::create(ModuleOp module, const WeightSet &weights) {
  std::unique_ptr<RefDevice> dev(new RefDevice(module));
  KVCacheType cacheType;
  for (StringRef name : {"prefill", "decode"}) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn || fn.getNumArguments() != 3 ||
        !isa<KVCacheType>(fn.getArgumentTypes()[2]))
      return absl::InvalidArgumentError(
          absl::StrCat("ref device: the module has no func @", name.str(),
                       "(tokens, positions, !kiln.kv_cache)"));
    cacheType = cast<KVCacheType>(fn.getArgumentTypes()[2]);
    std::string error;
    if (failed(checkCacheOrder(fn, error)))
      return absl::InvalidArgumentError(error);
  }
  dev->capacity_ = cacheType.getCapacity();
  dev->slotWidth_ = cacheType.getSlotWidth();
  dev->keys_.assign(cacheType.getLayers(),
                    std::vector<float>(dev->capacity_ * dev->slotWidth_));
  dev->values_ = dev->keys_;

  absl::Status status = absl::OkStatus();
  module.walk([&](WeightOp op) {
    std::string name = op.getName().str();
    if (dev->weights_.count(name) || !status.ok())
      return;
    const TensorView *t = weights.find(name);
    if (!t || t->numElements() != op.getType().getNumElements()) {
      status = absl::InvalidArgumentError(
          absl::StrCat(weights.origin(), ": no weight '", name,
                       "' of the shape the module needs"));
      return;
    }
    auto data = std::make_shared<std::vector<float>>(t->numElements());
    t->toFloat(data->data());
    dev->weights_[name] = std::move(data);
  });
  if (!status.ok())
    return status;
  return dev;
}

absl::StatusOr<std::vector<float>>
RefDevice::prefill(std::span<const int32_t> tokens,
                   std::span<const int32_t> positions) {
  return run("prefill", tokens, positions);
}

absl::StatusOr<std::vector<float>> RefDevice::decode(int32_t token,
                                                     int32_t position) {
  return run("decode", std::span<const int32_t>(&token, 1),
             std::span<const int32_t>(&position, 1));
}

absl::StatusOr<std::vector<float>>
RefDevice::run(StringRef function, std::span<const int32_t> tokens,
               std::span<const int32_t> positions) {
  auto fn = module_.lookupSymbol<func::FuncOp>(function);
  if (!fn)
    return absl::InvalidArgumentError(
        absl::StrCat("ref device: no func @", function.str()));
  int64_t s = int64_t(tokens.size());
  int64_t declared =
      cast<RankedTensorType>(fn.getArgumentTypes()[0]).getDimSize(0);
  if (s == 0 || positions.size() != tokens.size() ||
      (!ShapedType::isDynamic(declared) && declared != s))
    return absl::InvalidArgumentError(
        absl::StrCat("ref device: @", function.str(), " got ", s,
                     " tokens and ", positions.size(), " positions"));
  for (int32_t p : positions)
    if (p < 0 || p >= capacity_)
      return absl::InvalidArgumentError(
          absl::StrCat("ref device: position ", p,
                       " is outside the KV cache (capacity ", capacity_, ")"));

  llvm::DenseMap<Value, Tensor> env;
  env[fn.getArgument(0)] = Tensor{{s}, nullptr, {tokens.begin(), tokens.end()}};
  env[fn.getArgument(1)] =
      Tensor{{s}, nullptr, {positions.begin(), positions.end()}};
  env[fn.getArgument(2)] = Tensor{};

  std::vector<float> logits;
  for (Operation &opRef : fn.getBody().front()) {
    Operation *op = &opRef;
    auto in = [&](unsigned i) -> const Tensor & {
      return env[op->getOperand(i)];
    };
    auto set = [&](unsigned i, Tensor t) {
      env[op->getResult(i)] = std::move(t);
    };

    absl::Status status =
        llvm::TypeSwitch<Operation *, absl::Status>(op)
            .Case([&](WeightOp w) {
              auto shape = w.getType().getShape();
              set(0, {{shape.begin(), shape.end()},
                      weights_.at(w.getName().str()),
                      {}});
              return absl::OkStatus();
            })
            .Case([&](EmbeddingOp) -> absl::Status {
              const Tensor &table = in(0), &tok = in(1);
              int64_t v = table.dim(0), d = table.dim(1);
              std::vector<float> out(s * d); // [S, D]
              for (int64_t i = 0; i < s; ++i) {
                int32_t t = tok.ints[i];
                if (t < 0 || t >= v)
                  return opError(op, absl::StrCat("token id ", t,
                                                  " is outside the vocabulary "
                                                  "[0, ",
                                                  v, ")"));
                std::copy_n(table.f() + t * d, d, out.begin() + i * d);
              }
              set(0, floats({s, d}, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](RMSNormOp norm) {
              const Tensor &x = in(0), &w = in(1);
              int64_t d = x.dim(1);
              float eps = float(norm.getEpsilon().convertToDouble());
              std::vector<float> out(s * d); // [S, D]
              for (int64_t i = 0; i < s; ++i) {
                const float *row = x.f() + i * d;
                float ss = 0;
                for (int64_t j = 0; j < d; ++j)
                  ss += row[j] * row[j];
                float inv = 1.0f / std::sqrt(ss / float(d) + eps);
                for (int64_t j = 0; j < d; ++j)
                  out[i * d + j] = row[j] * inv * w.f()[j];
              }
              set(0, floats({s, d}, std::move(out)));
              return absl::OkStatus();
            })
            .Case<LinearOp, LogitsOp>([&](Operation *) {
              set(0, floats({s, in(1).dim(0)}, matmulT(in(0), in(1))));
              return absl::OkStatus();
            })
            .Case([&](RopeOp rope) {
              const Tensor &x = in(0);
              const std::vector<int32_t> &pos = in(1).ints;
              int64_t width = x.dim(1), heads = rope.getHeads();
              int64_t dh = width / heads, half = dh / 2;
              double theta = rope.getTheta().convertToDouble();
              bool interleaved = rope.getLayout() == RopeLayout::interleaved;
              std::vector<float> out(x.data->begin(), x.data->end()); // [S, W]
              for (int64_t i = 0; i < s; ++i)
                for (int64_t h = 0; h < heads; ++h)
                  for (int64_t j = 0; j < half; ++j) {
                    // Meta: freq_j = theta^(-2j/Dh), angle = position * freq_j.
                    double angle =
                        pos[i] * std::pow(theta, -2.0 * double(j) / double(dh));
                    float c = float(std::cos(angle)),
                          sn = float(std::sin(angle));
                    int64_t a = i * width + h * dh + (interleaved ? 2 * j : j);
                    int64_t b = interleaved ? a + 1 : a + half;
                    float x0 = x.f()[a], x1 = x.f()[b];
                    out[a] = x0 * c - x1 * sn;
                    out[b] = x0 * sn + x1 * c;
                  }
              set(0, floats({s, width}, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](KVWriteOp write) {
              const Tensor &k = in(0), &v = in(1);
              const std::vector<int32_t> &pos = in(3).ints;
              int64_t l = write.getLayer();
              for (int64_t i = 0; i < s; ++i) {
                std::copy_n(k.f() + i * slotWidth_, slotWidth_,
                            keys_[l].begin() + pos[i] * slotWidth_);
                std::copy_n(v.f() + i * slotWidth_, slotWidth_,
                            values_[l].begin() + pos[i] * slotWidth_);
              }
              set(0, Tensor{});
              return absl::OkStatus();
            })
            .Case([&](KVReadOp read) {
              const std::vector<int32_t> &pos = in(1).ints;
              int64_t t = *std::max_element(pos.begin(), pos.end()) + 1;
              int64_t l = read.getLayer();
              auto slots = [&](const std::vector<float> &layer) {
                return floats({t, slotWidth_},
                              {layer.begin(), layer.begin() + t * slotWidth_});
              };
              set(0, slots(keys_[l]));
              set(1, slots(values_[l]));
              return absl::OkStatus();
            })
            .Case([&](QKOp qk) {
              const Tensor &q = in(0), &k = in(1);
              int64_t heads = qk.getHeads(), group = heads / qk.getKvHeads();
              int64_t dh = q.dim(1) / heads, t = k.dim(0);
              float scale = float(qk.getScale().convertToDouble());
              std::vector<float> out(heads * s * t); // [H, S, T]
              for (int64_t h = 0; h < heads; ++h)
                for (int64_t i = 0; i < s; ++i)
                  for (int64_t j = 0; j < t; ++j) {
                    const float *a = q.f() + i * q.dim(1) + h * dh;
                    const float *b = k.f() + j * k.dim(1) + (h / group) * dh;
                    float acc = 0;
                    for (int64_t e = 0; e < dh; ++e)
                      acc += a[e] * b[e];
                    out[(h * s + i) * t + j] = acc * scale;
                  }
              set(0, floats({heads, s, t}, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](CausalMaskOp) {
              const Tensor &x = in(0);
              const std::vector<int32_t> &pos = in(1).ints;
              int64_t heads = x.dim(0), t = x.dim(2);
              std::vector<float> out(x.data->begin(), x.data->end());
              for (int64_t h = 0; h < heads; ++h)
                for (int64_t i = 0; i < s; ++i)
                  for (int64_t j = pos[i] + 1; j < t; ++j)
                    out[(h * s + i) * t + j] =
                        -std::numeric_limits<float>::infinity();
              set(0, floats(x.shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](SoftmaxOp) {
              const Tensor &x = in(0);
              int64_t t = x.shape.back(), rows = x.data->size() / t;
              std::vector<float> out(x.data->size());
              for (int64_t r = 0; r < rows; ++r) {
                const float *row = x.f() + r * t;
                float m = *std::max_element(row, row + t), sum = 0;
                for (int64_t j = 0; j < t; ++j)
                  sum += out[r * t + j] = std::exp(row[j] - m);
                for (int64_t j = 0; j < t; ++j)
                  out[r * t + j] /= sum;
              }
              set(0, floats(x.shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](PVOp pv) {
              const Tensor &p = in(0), &v = in(1);
              int64_t heads = p.dim(0), t = p.dim(2);
              int64_t kvHeads = pv.getKvHeads(), group = heads / kvHeads;
              int64_t dh = v.dim(1) / kvHeads, width = heads * dh;
              std::vector<float> out(s * width, 0.0f); // [S, H*Dh]
              for (int64_t h = 0; h < heads; ++h)
                for (int64_t i = 0; i < s; ++i)
                  for (int64_t j = 0; j < t; ++j) {
                    float w = p.f()[(h * s + i) * t + j];
                    const float *row = v.f() + j * v.dim(1) + (h / group) * dh;
                    float *o = out.data() + i * width + h * dh;
                    for (int64_t e = 0; e < dh; ++e)
                      o[e] += w * row[e];
                  }
              set(0, floats({s, width}, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](SiLUOp) {
              std::vector<float> out(in(0).data->begin(), in(0).data->end());
              for (float &x : out)
                x = x / (1.0f + std::exp(-x));
              set(0, floats(in(0).shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case<MulOp, AddOp>([&](Operation *) {
              const Tensor &a = in(0), &b = in(1);
              bool mul = isa<MulOp>(op);
              std::vector<float> out(a.data->size());
              for (size_t i = 0; i < out.size(); ++i)
                out[i] = mul ? a.f()[i] * b.f()[i] : a.f()[i] + b.f()[i];
              set(0, floats(a.shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](func::ReturnOp ret) {
              logits = *env[ret.getOperand(0)].data;
              return absl::OkStatus();
            })
            .Default([&](Operation *) {
              return opError(op, "the reference device cannot run this op");
            });
    if (!status.ok())
      return status;
  }
  return logits;
}

} // namespace kiln
