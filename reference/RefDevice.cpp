//===- RefDevice.cpp - the fp32 reference interpreter ---------------------===//
#include "reference/RefDevice.h"
#include "ir/KilnOps.h"
#include "runtime/ActivationQuant.h"

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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

/// A weight's tensor, sharing the converted buffer.
Tensor shared(RankedTensorType type,
              std::shared_ptr<const std::vector<float>> data) {
  return {
      {type.getShape().begin(), type.getShape().end()}, std::move(data), {}};
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
std::vector<float> matmulT(const float *x, int64_t s, int64_t k, const float *w,
                           int64_t n) {
  std::vector<float> out(s * n); // [S, N]
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float *a = x + i * k, *b = w + j * k;
      float acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += a[t] * b[t];
      out[i * n + j] = acc;
    }
  return out;
}

/// Each row of x[S, D] divided by its root mean square, times weight[D]
/// when there is one (a fused prologue has it folded into the matmul).
std::vector<float> rmsNorm(const float *x, int64_t s, int64_t d, float eps,
                           const float *weight) {
  std::vector<float> out(s * d); // [S, D]
  for (int64_t i = 0; i < s; ++i) {
    const float *row = x + i * d;
    float ss = 0;
    for (int64_t j = 0; j < d; ++j)
      ss += row[j] * row[j];
    float inv = 1.0f / std::sqrt(ss / float(d) + eps);
    for (int64_t j = 0; j < d; ++j)
      out[i * d + j] = row[j] * inv * (weight ? weight[j] : 1.0f);
  }
  return out;
}

/// Rotates each head of x[S, heads*Dh] in place by positions[s] * freq_j
/// (positions divided by a linear scaling's factor first; a dynamic
/// scaling's base from the sequence length the call sees, max position + 1,
/// as transformers' forward computes it).
void rope(std::vector<float> &x, int64_t s, int64_t heads,
          const std::vector<int32_t> &positions, double theta,
          RopeLayout layout, std::optional<APFloat> linear,
          RopeDynamicAttr dynamic) {
  const double divisor = linear ? linear->convertToDouble() : 1.0;
  int64_t width = int64_t(x.size()) / s, dh = width / heads, half = dh / 2;
  if (dynamic && s > 0)
    theta = dynamic.base(
        theta, dh,
        int64_t(*std::max_element(positions.begin(), positions.begin() + s)) +
            1);
  bool interleaved = layout == RopeLayout::interleaved;
  for (int64_t i = 0; i < s; ++i)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < half; ++j) {
        // Meta: freq_j = theta^(-2j/Dh), angle = position * freq_j.
        double angle = positions[i] / divisor *
                       std::pow(theta, -2.0 * double(j) / double(dh));
        float c = float(std::cos(angle)), sn = float(std::sin(angle));
        int64_t a = i * width + h * dh + (interleaved ? 2 * j : j);
        int64_t b = interleaved ? a + 1 : a + half;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * sn;
        x[b] = x0 * sn + x1 * c;
      }
}

/// Attention's shapes: S queries of `heads` heads, T keys of `kvHeads`.
struct AttentionShape {
  int64_t s, t, heads, kvHeads, dh;
  int64_t group() const { return heads / kvHeads; }
};

/// scores[H, S, T] = scale * q[s, head h] · k[t, kv head h / group].
std::vector<float> qk(const float *q, const float *k, const AttentionShape &a,
                      float scale) {
  std::vector<float> out(a.heads * a.s * a.t); // [H, S, T]
  for (int64_t h = 0; h < a.heads; ++h)
    for (int64_t i = 0; i < a.s; ++i)
      for (int64_t j = 0; j < a.t; ++j) {
        const float *x = q + i * a.heads * a.dh + h * a.dh;
        const float *y = k + j * a.kvHeads * a.dh + (h / a.group()) * a.dh;
        float acc = 0;
        for (int64_t e = 0; e < a.dh; ++e)
          acc += x[e] * y[e];
        out[(h * a.s + i) * a.t + j] = acc * scale;
      }
  return out;
}

/// Key t is at position t: hide the keys after each query's position.
void causalMask(std::vector<float> &scores, const AttentionShape &a,
                const std::vector<int32_t> &positions) {
  for (int64_t h = 0; h < a.heads; ++h)
    for (int64_t i = 0; i < a.s; ++i)
      for (int64_t j = positions[i] + 1; j < a.t; ++j)
        scores[(h * a.s + i) * a.t + j] =
            -std::numeric_limits<float>::infinity();
}

/// Softmax of each row of length t, the row maximum subtracted.
void softmax(std::vector<float> &x, int64_t t) {
  for (size_t r = 0; r < x.size() / t; ++r) {
    float *row = x.data() + r * t;
    float m = *std::max_element(row, row + t), sum = 0;
    for (int64_t j = 0; j < t; ++j)
      sum += row[j] = std::exp(row[j] - m);
    for (int64_t j = 0; j < t; ++j)
      row[j] /= sum;
  }
}

/// out[S, H*Dh]: probs[H, S, T] times v[T, kv head h / group].
std::vector<float> pv(const std::vector<float> &p, const float *v,
                      const AttentionShape &a) {
  std::vector<float> out(a.s * a.heads * a.dh, 0.0f); // [S, H*Dh]
  for (int64_t h = 0; h < a.heads; ++h)
    for (int64_t i = 0; i < a.s; ++i)
      for (int64_t j = 0; j < a.t; ++j) {
        float w = p[(h * a.s + i) * a.t + j];
        const float *row = v + j * a.kvHeads * a.dh + (h / a.group()) * a.dh;
        float *o = out.data() + (i * a.heads + h) * a.dh;
        for (int64_t e = 0; e < a.dh; ++e)
          o[e] += w * row[e];
      }
  return out;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

/// w[rows, cols] as the runtime stores it in `format` (--quantize's round
/// to nearest), dequantized exactly: the quantized model the devices run.
std::vector<float> roundTrip(const std::vector<float> &w, int64_t rows,
                             int64_t cols, const QuantFormat &format) {
  std::vector<float> out(w.size()); // [rows, cols]
  quantizeRoundToNearest(w.data(), rows, cols, format).dequantize(out.data());
  return out;
}

/// Every cache write (kv_write, fused_qkv) updates the one cache in place,
/// which is right only when each other reader of its cache operand runs before
/// it.
LogicalResult checkCacheOrder(func::FuncOp fn, std::string &error) {
  WalkResult r = fn.walk([&](Operation *write) {
    if (!isa<KVWriteOp, FusedQKVOp>(write))
      return WalkResult::advance();
    Value cache = isa<KVWriteOp>(write) ? cast<KVWriteOp>(write).getCache()
                                        : cast<FusedQKVOp>(write).getCache();
    for (Operation *user : cache.getUsers())
      if (user != write && !user->isBeforeInBlock(write)) {
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
RefDevice::create(ModuleOp module, const WeightSet &weights,
                  RefOptions options) {
  std::unique_ptr<RefDevice> dev(new RefDevice(module, options));
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
  dev->headDim_ = cacheType.getHeadDim();
  if (cacheType.isQuantized())
    dev->kvCodes_ =
        cacheType.getElementType().isInteger(8) ? KVCodes::Int8 : KVCodes::E4M3;
  dev->keys_.assign(cacheType.getLayers(),
                    std::vector<float>(dev->capacity_ * dev->slotWidth_));
  dev->values_ = dev->keys_;

  // Checkpoint tensors converted to float32 once, by name.
  auto load = [&](const std::string &name, const std::vector<int64_t> &shape)
      -> absl::StatusOr<std::shared_ptr<const std::vector<float>>> {
    if (auto it = dev->weights_.find(name); it != dev->weights_.end())
      return it->second;
    int64_t elements = 1;
    for (int64_t d : shape)
      elements *= d;
    if (shape.size() == 2 && weights.prequantized(name)) {
      auto m = weights.readQuantized(name, shape[0], shape[1]);
      if (!m.ok())
        return m.status();
      auto data = std::make_shared<std::vector<float>>(elements);
      m->dequantize(data->data());
      dev->prequantized_.insert(name);
      return dev->weights_[name] = std::move(data);
    }
    const TensorView *t = weights.find(name);
    if (!t || t->numElements() != elements)
      return absl::InvalidArgumentError(
          absl::StrCat(weights.origin(), ": no weight '", name,
                       "' of the shape the module needs"));
    auto data = std::make_shared<std::vector<float>>(elements);
    t->toFloat(data->data());
    return dev->weights_[name] = std::move(data);
  };
  absl::Status status = absl::OkStatus();
  module.walk([&](Operation *op) {
    if (!status.ok())
      return;
    if (auto w = dyn_cast<WeightOp>(op)) {
      auto type = w.getType();
      std::string name = w.getName().str();
      auto values =
          load(name, {type.getShape().begin(), type.getShape().end()});
      status = values.status();
      if (auto quant = weightQuant(type); quant && values.ok())
        dev->quantized_[name] =
            dev->prequantized_.count(name)
                ? *values
                : std::make_shared<const std::vector<float>>(
                      roundTrip(**values, type.getDimSize(0),
                                type.getDimSize(1), *quant));
    } else if (auto p = dyn_cast<PackedWeightOp>(op)) {
      if (!dev->packed_.count(p.getName().str()))
        status = dev->pack(p, load);
    }
  });
  if (!status.ok())
    return status;
  return dev;
}

absl::Status RefDevice::pack(PackedWeightOp op, const LoadFn &load) {
  auto type = op.getType();
  int64_t k = type.getDimSize(1);
  auto packed = std::make_shared<std::vector<float>>(type.getNumElements());
  float *row = packed->data(); // [sum(rows), K]: the sources stacked
  auto quant = weightQuant(type);
  for (auto [source, rows] : llvm::zip(op.getSources(), op.getRows())) {
    std::string name = cast<StringAttr>(source).str();
    auto w = load(name, {rows, k});
    if (!w.ok())
      return w.status();
    // Quantized: each source's rows as the runtime stores them (a
    // pre-quantized module's values as they are); the norm folded in after,
    // exactly.
    if (quant && !prequantized_.count(name)) {
      std::vector<float> q = roundTrip(**w, rows, k, *quant);
      row = std::copy(q.begin(), q.end(), row);
    } else {
      row = std::copy((*w)->begin(), (*w)->end(), row);
    }
  }
  if (auto norm = op.getScaledBy()) { // fold the norm weight into columns
    auto g = load(norm->str(), {k});
    if (!g.ok())
      return g.status();
    if (options_.fp8Activations && quant && quant->kind == QuantKind::FP8)
      unfolded_[op.getName().str()] = {*packed, **g};
    for (int64_t i = 0; i < type.getDimSize(0); ++i)
      for (int64_t j = 0; j < k; ++j)
        (*packed)[i * k + j] *= (**g)[j];
  }
  packed_[op.getName().str()] = std::move(packed);
  return absl::OkStatus();
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

  // The matmul of fused_linear and fused_qkv: the RMSNorm prologue when
  // eps is given (the norm weight is folded into w), then x·wᵀ: [S, N].
  // With fp8Activations, @prefill's matmuls of fp8 weights round their
  // input to e4m3 per row first, after the norm weight (so the weight
  // before its fold multiplies it).
  const bool w8a8 = options_.fp8Activations && function == "prefill";
  auto prologueMatmul = [&](const Tensor &x, const Tensor &w,
                            std::optional<APFloat> eps, Operation *op) {
    int64_t k = x.dim(1);
    std::vector<float> normed; // [S, K]
    const float *rows = x.f();
    if (eps) {
      normed = rmsNorm(rows, s, k, float(eps->convertToDouble()),
                       /*weight=*/nullptr);
      rows = normed.data();
    }
    auto quant = weightQuant(op->getOperand(1).getType());
    if (!w8a8 || !quant || quant->kind != QuantKind::FP8)
      return matmulT(rows, s, k, w.f(), w.dim(0));
    std::vector<float> a(rows, rows + s * k); // [S, K]
    const float *weight = w.f();
    auto packed = op->getOperand(1).getDefiningOp<PackedWeightOp>();
    if (auto it =
            packed ? unfolded_.find(packed.getName().str()) : unfolded_.end();
        it != unfolded_.end()) {
      const auto &[unfolded, g] = it->second;
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < k; ++j)
          a[i * k + j] *= g[j];
      weight = unfolded.data();
    }
    for (int64_t i = 0; i < s; ++i)
      roundTripActivationRow(a.data() + i * k, k);
    return matmulT(a.data(), s, k, weight, w.dim(0));
  };
  // Stores rows of keys and values (each `stride` floats apart) in their
  // slots of one layer, rotating the keys first when theta is given.
  auto writeKV = [&](int64_t layer, const float *k, int64_t kStride,
                     const float *v, int64_t vStride, int64_t rows,
                     const std::vector<int32_t> &pos,
                     std::optional<APFloat> theta,
                     std::optional<RopeLayout> layout,
                     std::optional<APFloat> linear, RopeDynamicAttr dynamic) {
    std::vector<float> keys(rows * slotWidth_); // [S, Hkv*Dh]
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(k + i * kStride, slotWidth_, keys.begin() + i * slotWidth_);
    if (theta)
      rope(keys, rows, slotWidth_ / headDim_, pos, theta->convertToDouble(),
           *layout, linear, dynamic);
    for (int64_t i = 0; i < rows; ++i) {
      float *key = keys_[layer].data() + pos[i] * slotWidth_;
      float *value = values_[layer].data() + pos[i] * slotWidth_;
      std::copy_n(keys.begin() + i * slotWidth_, slotWidth_, key);
      std::copy_n(v + i * vStride, slotWidth_, value);
      for (int64_t h = 0; kvCodes_ && h < slotWidth_; h += headDim_) {
        roundTripKVHead(key + h, headDim_, *kvCodes_);
        roundTripKVHead(value + h, headDim_, *kvCodes_);
      }
    }
  };

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
              std::string name = w.getName().str();
              set(0, shared(w.getType(), weightQuant(w.getType())
                                             ? quantized_.at(name)
                                             : weights_.at(name)));
              return absl::OkStatus();
            })
            .Case([&](PackedWeightOp w) {
              set(0, shared(w.getType(), packed_.at(w.getName().str())));
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
              const Tensor &x = in(0);
              float eps = float(norm.getEpsilon().convertToDouble());
              set(0,
                  floats(x.shape, rmsNorm(x.f(), s, x.dim(1), eps, in(1).f())));
              return absl::OkStatus();
            })
            .Case<LinearOp, LogitsOp>([&](Operation *) {
              const Tensor &x = in(0), &w = in(1);
              set(0, floats({s, w.dim(0)},
                            matmulT(x.f(), s, x.dim(1), w.f(), w.dim(0))));
              return absl::OkStatus();
            })
            .Case([&](FusedLinearOp fused) {
              int64_t n = in(1).dim(0);
              std::vector<float> y = // [S, N]
                  prologueMatmul(in(0), in(1), fused.getNormEpsilon(), op);
              if (fused.getSwiglu()) {
                int64_t f = n / 2;             // y = [gate | up]
                std::vector<float> out(s * f); // [S, F]
                for (int64_t i = 0; i < s; ++i)
                  for (int64_t j = 0; j < f; ++j)
                    out[i * f + j] = silu(y[i * n + j]) * y[i * n + f + j];
                set(0, floats({s, f}, std::move(out)));
                return absl::OkStatus();
              }
              if (fused.getResidual()) {
                const float *h = env[fused.getResidual()].f();
                for (size_t i = 0; i < y.size(); ++i)
                  y[i] += h[i];
              }
              int64_t col = 0;
              for (auto [r, result] : llvm::enumerate(fused.getResults())) {
                int64_t width =
                    cast<RankedTensorType>(result.getType()).getDimSize(1);
                std::vector<float> part(s * width); // [S, width]
                for (int64_t i = 0; i < s; ++i)
                  std::copy_n(y.begin() + i * n + col, width,
                              part.begin() + i * width);
                set(r, floats({s, width}, std::move(part)));
                col += width;
              }
              return absl::OkStatus();
            })
            .Case([&](RopeOp op) {
              std::vector<float> out(in(0).data->begin(), in(0).data->end());
              rope(out, s, op.getHeads(), in(1).ints,
                   op.getTheta().convertToDouble(), op.getLayout(),
                   op.getLinear(), op.getDynamicAttr());
              set(0, floats(in(0).shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](KVWriteOp write) {
              writeKV(write.getLayer(), in(0).f(), slotWidth_, in(1).f(),
                      slotWidth_, s, in(3).ints, write.getRopeTheta(),
                      write.getRopeLayout(), write.getRopeLinear(),
                      write.getRopeDynamicAttr());
              set(0, Tensor{});
              return absl::OkStatus();
            })
            .Case([&](FusedQKVOp qkv) {
              // y = [q | k | v]: k and v go to the cache, q to the result.
              int64_t n = in(1).dim(0), qWidth = n - 2 * slotWidth_;
              std::vector<float> y = // [S, N]
                  prologueMatmul(in(0), in(1), qkv.getNormEpsilon(), op);
              writeKV(qkv.getLayer(), y.data() + qWidth, n,
                      y.data() + qWidth + slotWidth_, n, s, in(3).ints,
                      qkv.getRopeTheta(), qkv.getRopeLayout(),
                      qkv.getRopeLinear(), qkv.getRopeDynamicAttr());
              std::vector<float> q(s * qWidth); // [S, H*Dh]
              for (int64_t i = 0; i < s; ++i)
                std::copy_n(y.begin() + i * n, qWidth, q.begin() + i * qWidth);
              set(0, floats({s, qWidth}, std::move(q)));
              set(1, Tensor{});
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
            .Case([&](QKOp op) {
              AttentionShape a{s, in(1).dim(0), int64_t(op.getHeads()),
                               int64_t(op.getKvHeads()),
                               in(0).dim(1) / int64_t(op.getHeads())};
              set(0, floats({a.heads, s, a.t},
                            qk(in(0).f(), in(1).f(), a,
                               float(op.getScale().convertToDouble()))));
              return absl::OkStatus();
            })
            .Case([&](CausalMaskOp) {
              const Tensor &x = in(0);
              std::vector<float> out(x.data->begin(), x.data->end());
              causalMask(out, {s, x.dim(2), x.dim(0), 1, 0}, in(1).ints);
              set(0, floats(x.shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](SoftmaxOp) {
              std::vector<float> out(in(0).data->begin(), in(0).data->end());
              softmax(out, in(0).shape.back());
              set(0, floats(in(0).shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](PVOp op) {
              const Tensor &p = in(0), &v = in(1);
              int64_t kvHeads = op.getKvHeads();
              AttentionShape a{s, p.dim(2), p.dim(0), kvHeads,
                               v.dim(1) / kvHeads};
              set(0, floats({s, a.heads * a.dh}, pv(*p.data, v.f(), a)));
              return absl::OkStatus();
            })
            .Case([&](AttentionOp op) {
              // The four steps of the unfused ops, in one: the reference
              // shows what the fused kernel must compute, not how.
              const Tensor &k = in(1), &v = in(2);
              const std::vector<int32_t> &pos = in(3).ints;
              AttentionShape a{s, k.dim(0), int64_t(op.getHeads()),
                               int64_t(op.getKvHeads()),
                               in(0).dim(1) / int64_t(op.getHeads())};
              std::vector<float> q(in(0).data->begin(), in(0).data->end());
              if (auto theta = op.getRopeTheta())
                rope(q, s, a.heads, pos, theta->convertToDouble(),
                     *op.getRopeLayout(), op.getRopeLinear(),
                     op.getRopeDynamicAttr());
              std::vector<float> p = qk(q.data(), k.f(), a,
                                        float(op.getScale().convertToDouble()));
              causalMask(p, a, pos);
              softmax(p, a.t);
              set(0, floats({s, a.heads * a.dh}, pv(p, v.f(), a)));
              return absl::OkStatus();
            })
            .Case([&](ExpOp) {
              std::vector<float> out(in(0).data->begin(), in(0).data->end());
              for (float &x : out)
                x = std::exp(x);
              set(0, floats(in(0).shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case<ReduceMaxOp, ReduceSumOp>([&](Operation *) {
              const Tensor &x = in(0);
              int64_t t = x.shape.back(), rows = x.data->size() / t;
              bool max = isa<ReduceMaxOp>(op);
              std::vector<float> out(rows); // [.., 1]
              for (int64_t r = 0; r < rows; ++r) {
                const float *row = x.f() + r * t;
                out[r] = max ? *std::max_element(row, row + t)
                             : std::accumulate(row, row + t, 0.0f);
              }
              std::vector<int64_t> shape = x.shape;
              shape.back() = 1;
              set(0, floats(shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case<SubOp, DivOp>([&](Operation *) {
              // The rhs is the lhs's shape or one value per row.
              const Tensor &a = in(0), &b = in(1);
              int64_t t = a.shape.back();
              bool perRow = b.shape.back() == 1 && t != 1;
              bool sub = isa<SubOp>(op);
              std::vector<float> out(a.data->size());
              for (size_t i = 0; i < out.size(); ++i) {
                float r = b.f()[perRow ? i / t : i];
                out[i] = sub ? a.f()[i] - r : a.f()[i] / r;
              }
              set(0, floats(a.shape, std::move(out)));
              return absl::OkStatus();
            })
            .Case([&](SiLUOp) {
              std::vector<float> out(in(0).data->begin(), in(0).data->end());
              for (float &x : out)
                x = silu(x);
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
