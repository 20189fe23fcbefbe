//===- Bundle.cpp - a safetensors-layout file with the Program as JSON ----===//
#include "runtime/Bundle.h"
#include "runtime/Hash.h"
#include "runtime/JsonRead.h"
#include "runtime/QuantLayout.h"
#include "runtime/SafeTensors.h"

#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>

namespace kiln {
namespace {
using Json = nlohmann::json;

const char *kFormat = "kiln-bundle";

const std::map<Region, std::string> &regionNames() {
  static const std::map<Region, std::string> names = {
      {Region::Arena, "arena"},
      {Region::Weight, "weight"},
      {Region::Pool, "pool"},
      {Region::Tokens, "tokens"},
      {Region::Positions, "positions"},
      {Region::BlockTable, "block_table"},
      {Region::Workspace, "workspace"},
      {Region::Counters, "counters"},
      {Region::Sampled, "sampled"},
      {Region::Count, "count"},
      {Region::Sampling, "sampling"},
      {Region::History, "history"},
      {Region::LogitBias, "logit_bias"},
      {Region::RowSequence, "row_sequence"},
      {Region::Dequantized, "dequantized"}};
  return names;
}

Json configJson(const LlamaConfig &c) {
  Json j = {{"hidden_size", c.hiddenSize},
            {"intermediate_size", c.intermediateSize},
            {"num_hidden_layers", c.numLayers},
            {"num_attention_heads", c.numHeads},
            {"num_key_value_heads", c.numKVHeads},
            {"vocab_size", c.vocabSize},
            {"max_position_embeddings", c.maxPositions},
            {"rms_norm_eps", c.rmsNormEps},
            {"rope_theta", c.ropeTheta},
            {"tie_word_embeddings", c.tieWordEmbeddings}};
  if (!c.ropeScaling.empty())
    j["rope_scaling"] = {{"rope_type", c.ropeScaling},
                         {"factor", c.ropeScalingFactor}};
  return j;
}

Json launchJson(const Launch &l) {
  Json args = Json::array();
  for (const Argument &a : l.args) {
    Json arg = {{"region", regionNames().at(a.region)}};
    // The dequantized region's offset only where there is one (the FP8
    // GEMM's operands): a dequantized weight's launches stay as they were.
    if (a.region == Region::Arena || a.region == Region::Pool ||
        (a.region == Region::Dequantized && a.offset))
      arg["offset"] = a.offset;
    if (a.region == Region::Weight)
      arg["name"] = a.weight;
    args.push_back(arg);
  }
  Json out;
  if (!runsKernel(l.kernel) && l.kernel != kGemm) {
    out = {{"collective", l.kernel == kAllReduce ? "all_reduce" : "all_gather"},
           {"cols", l.collectiveCols},
           {"name", l.name},
           {"args", args}};
  } else if (l.kernel == kGemm) {
    const GemmShape &g = l.gemm;
    Json gemm = {{"m", g.m}, {"n", g.n}, {"k", g.k}};
    // What differs from an f32 D of all m rows.
    if (g.algo >= 0)
      gemm["algo"] = g.algo;
    if (g.rows != GemmRows::All)
      gemm["rows"] = g.rows == GemmRows::Count ? "count" : "last";
    if (g.beta)
      gemm["beta"] = g.beta;
    if (g.f16Out)
      gemm["out"] = "f16";
    if (g.fp8)
      gemm["inputs"] = "fp8";
    out = {{"gemm", gemm}, {"name", l.name}, {"args", args}};
  } else {
    out = {{"kernel", l.kernel},
           {"name", l.name},
           {"grid", l.grid},
           {"block", l.blockThreads},
           {"args", args}};
  }
  if (l.when != LaunchWhen::Always)
    out["when"] =
        l.when == LaunchWhen::EveryLogit ? "every_logit" : "last_logit";
  return out;
}

Json programJson(const Bundle &b) {
  const Program &p = b.program;
  Json kernels = Json::array(), weights = Json::array(),
       launches = Json::array();
  for (const KernelCode &k : p.kernels) {
    Json kernel = {{"name", k.name},
                   {"entry", k.entry},
                   {"provenance", k.provenance},
                   {"params", k.params}};
    if (k.dynamicSharedBytes > 0)
      kernel["dynamic_shared"] = k.dynamicSharedBytes;
    kernels.push_back(std::move(kernel));
  }
  for (const WeightBuffer &w : p.weights) {
    Json sources = Json::array();
    for (const WeightSource &s : w.sources) {
      Json source = {{"name", s.name}, {"shape", s.shape}};
      if (s.shardParts > 1) // a rank's slice: absent, the whole tensor
        source["shard"] = {{"axis", s.shardAxis}, {"parts", s.shardParts}};
      sources.push_back(std::move(source));
    }
    Json entry = {{"name", w.name},
                  {"sources", sources},
                  {"cols", w.cols},
                  {"scaled_by", w.scaledBy}};
    if (w.quant) // absent: f16
      entry["quant"] = w.quant->name();
    weights.push_back(std::move(entry));
  }
  for (const Launch &l : p.decode)
    launches.push_back(launchJson(l));
  auto plansJson = [](const std::vector<StepPlan> &plans) {
    Json buckets = Json::array();
    for (const StepPlan &plan : plans) {
      Json list = Json::array();
      for (const Launch &l : plan.launches)
        list.push_back(launchJson(l));
      buckets.push_back({{"rows", plan.rows}, {"launches", list}});
    }
    return buckets;
  };
  Json program = {
      {"model", b.model},
      {"lora", b.lora},
      {"config", configJson(b.config)},
      {"vocab", p.vocab},
      {"max_positions", p.maxPositions},
      {"arena_bytes", p.arenaBytes},
      {"pool",
       {{"bytes", p.poolBytes},
        {"blocks", p.poolBlocks},
        {"block_size", p.blockSize},
        {"kv_dtype", p.kvDtype},
        {"sequences", p.sequences},
        {"table_blocks", p.tableBlocks}}},
      {"ranks", p.ranks},
      {"workspace_floats", p.workspaceFloats},
      {"counters", p.counters},
      {"kernels", kernels},
      {"weights", weights},
      {"decode", {{"logits_offset", p.decodeLogits}, {"launches", launches}}},
      {"prefill",
       {{"logits_offset", p.prefillLogits}, {"buckets", plansJson(p.prefill)}}},
      {"batches", plansJson(p.batches)}};
  if (p.dequantizedHalves > 0) // absent: no plan dequantizes a weight
    program["dequantized_halves"] = p.dequantizedHalves;
  return program;
}

/// One launch, every reference inside it checked against the Program so far
/// (kernels, weights, regions).
/// A collective of a plan of `rows` rows: its operands in the arena, each
/// fitting ([rows, cols] f16 for an all-reduce; [rows, cols] f32 in and
/// [rows, ranks * cols] f32 out for an all-gather).
absl::Status checkCollective(const Launch &l, int64_t rows, const Program &p) {
  if (runsKernel(l.kernel) || l.kernel == kGemm)
    return absl::OkStatus();
  const bool reduce = l.kernel == kAllReduce;
  for (size_t i = 0; i < l.args.size(); ++i) {
    const Argument &a = l.args[i];
    bool out = i + 1 == l.args.size();
    int64_t cols =
        !reduce && out ? l.collectiveCols * p.ranks : l.collectiveCols;
    int size = reduce ? 2 : 4;
    if (a.region != Region::Arena ||
        rows > (p.arenaBytes - a.offset) / size / cols)
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", l.name, ": a collective's [", rows, ", ",
                       cols, "] operand does not fit the arena"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Launch> readLaunch(const Json &l, const Program &p,
                                  const std::map<std::string, bool> &weights) {
  Launch launch{kGemm, l.at("name").get<std::string>(), {1, 1, 1}, 0, {}};
  int params = 3; // a GEMM's A, W, D (and C)
  std::string when = l.value("when", std::string("always"));
  if (when != "always" && when != "every_logit" && when != "last_logit")
    return absl::InvalidArgumentError(
        absl::StrCat("launch ", launch.name, " runs when '", when,
                     "' (always, every_logit, last_logit)"));
  launch.when = when == "always"        ? LaunchWhen::Always
                : when == "every_logit" ? LaunchWhen::EveryLogit
                                        : LaunchWhen::LastLogit;
  if (l.contains("collective")) {
    std::string kind = l.at("collective").get<std::string>();
    if (kind != "all_reduce" && kind != "all_gather")
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", launch.name, " is a collective '", kind,
                       "' (all_reduce, all_gather)"));
    if (p.ranks < 2)
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", launch.name, " is a collective in a program of one rank"));
    launch.kernel = kind == "all_reduce" ? kAllReduce : kAllGather;
    launch.collectiveCols = jsonInteger<int64_t>(l.at("cols"));
    if (launch.collectiveCols < 1 || launch.collectiveCols > INT32_MAX)
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", launch.name, " has ", launch.collectiveCols, " columns"));
    // An all-reduce with or without its residual.
    params = launch.kernel == kAllReduce && l.at("args").size() == 3 ? 3 : 2;
  } else if (l.contains("gemm")) {
    const Json &g = l.at("gemm");
    launch.gemm = {jsonInteger<int64_t>(g.at("m")),
                   jsonInteger<int64_t>(g.at("n")),
                   jsonInteger<int64_t>(g.at("k"))};
    launch.gemm.algo = g.contains("algo") ? jsonInteger<int>(g["algo"]) : -1;
    if (launch.gemm.algo < -1 || launch.gemm.algo > kMaxGemmAlgo)
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", launch.name, " asks for GEMM algorithm ",
                       launch.gemm.algo, " (-1 to ", kMaxGemmAlgo, ")"));
    std::string rows = g.value("rows", std::string("all")),
                out = g.value("out", std::string("f32")),
                inputs = g.value("inputs", std::string("f16"));
    launch.gemm.beta = g.contains("beta") ? jsonInteger<int>(g["beta"]) : 0;
    if ((rows != "all" && rows != "count" && rows != "last") ||
        (out != "f32" && out != "f16") ||
        (inputs != "f16" && inputs != "fp8") ||
        (launch.gemm.beta != 0 && launch.gemm.beta != 1))
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", launch.name, " has a GEMM of rows '", rows,
          "' (all, count, last), out '", out, "' (f32, f16), inputs '", inputs,
          "' (f16, fp8) and beta ", launch.gemm.beta, " (0, 1)"));
    launch.gemm.rows = rows == "all"     ? GemmRows::All
                       : rows == "count" ? GemmRows::Count
                                         : GemmRows::Last;
    launch.gemm.f16Out = out == "f16";
    launch.gemm.fp8 = inputs == "fp8";
    // and C; the FP8 GEMM's two scale vectors
    params = 3 + launch.gemm.beta + (launch.gemm.fp8 ? 2 : 0);
    if (launch.gemm.m <= 0 || launch.gemm.n <= 0 || launch.gemm.k <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", launch.name, " has an empty GEMM"));
    // cuBLAS takes 32-bit sizes; bounding them also keeps the products
    // below (m * k * 2, m * n) inside int64_t.
    if (std::max({launch.gemm.m, launch.gemm.n, launch.gemm.k}) > INT32_MAX)
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", launch.name, " has a GEMM size past 2^31 - 1"));
  } else {
    launch.kernel = jsonInteger<int>(l.at("kernel"));
    std::vector<int64_t> grid = jsonIntegers<int64_t>(l.at("grid"));
    if (grid.size() != 3)
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", launch.name, " has a grid of ", grid.size(),
                       " dimensions (3)"));
    launch.grid = {grid[0], grid[1], grid[2]};
    launch.blockThreads = jsonInteger<int64_t>(l.at("block"));
    // CUDA's limits: a damaged grid would otherwise hang or fail the launch.
    const int64_t most[3] = {(int64_t(1) << 31) - 1, 65535, 65535};
    for (int axis = 0; axis < 3; ++axis)
      if (launch.grid[axis] < 1 || launch.grid[axis] > most[axis])
        return absl::InvalidArgumentError(
            absl::StrCat("launch ", launch.name, " has a grid of ",
                         launch.grid[axis], " blocks along axis ", axis));
    if (launch.blockThreads < 1 || launch.blockThreads > 1024)
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", launch.name, " has blocks of ",
                       launch.blockThreads, " threads (1 to 1024)"));
    if (launch.kernel < 0 || launch.kernel >= int(p.kernels.size()))
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", launch.name, " names kernel ", launch.kernel,
                       " of ", p.kernels.size()));
    params = p.kernels[launch.kernel].params;
  }
  for (const Json &a : l.at("args")) {
    std::string region = a.at("region").get<std::string>();
    auto it = std::find_if(regionNames().begin(), regionNames().end(),
                           [&](auto &e) { return e.second == region; });
    if (it == regionNames().end())
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", launch.name, " has an argument in region '", region, "'"));
    Argument arg(it->first,
                 a.contains("offset") ? jsonInteger<int64_t>(a["offset"]) : 0,
                 a.value("name", std::string()));
    if (arg.region == Region::Weight && !weights.count(arg.weight))
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", launch.name, " reads weight '", arg.weight,
                       "', which the manifest lacks"));
    if ((arg.region == Region::Arena && arg.offset >= p.arenaBytes) ||
        (arg.region == Region::Pool && arg.offset >= p.poolBytes) ||
        (arg.region == Region::Dequantized &&
         arg.offset >= p.dequantizedHalves * 2) ||
        arg.offset < 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", launch.name, " has an argument outside its region"));
    launch.args.push_back(std::move(arg));
  }
  // A launch with another argument count would hand the kernel garbage.
  if (int(launch.args.size()) != params)
    return absl::InvalidArgumentError(absl::StrCat(
        "launch ", launch.name, " passes ", launch.args.size(), " arguments, ",
        launch.kernel == kGemm      ? std::string("a GEMM")
        : runsKernel(launch.kernel) ? "kernel " + p.kernels[launch.kernel].name
                                    : std::string("the collective"),
        " takes ", params));
  // A GEMM's sizes are known here: A [m, k] f16 inside the arena, W a
  // weight, D (and C) [m, n] f32 inside the workspace or the arena, or
  // f16 inside the arena; D apart from A, and C either D or apart from it.
  const GemmShape &g = launch.gemm;
  // `elements` of `size` bytes (m * n < 2^62: their bytes might not fit
  // an int64_t).
  auto fits = [&](const Argument &a, int64_t elements, int size, bool f32) {
    return (a.region == Region::Arena &&
            elements <= (p.arenaBytes - a.offset) / size) ||
           (f32 && a.region == Region::Workspace &&
            elements <= (p.workspaceFloats * 4 - a.offset) / size);
  };
  auto apart = [](const Argument &x, int64_t xBytes, const Argument &y,
                  int64_t yBytes) {
    return x.region != y.region || x.offset + xBytes <= y.offset ||
           y.offset + yBytes <= x.offset;
  };
  // `bytes` in Region::Dequantized at a's offset.
  auto inDequantized = [&](const Argument &a, int64_t bytes) {
    return a.region == Region::Dequantized &&
           bytes <= p.dequantizedHalves * 2 - a.offset;
  };
  auto gemmFits = [&] {
    const std::vector<Argument> &a = launch.args;
    int size = g.f16Out ? 2 : 4;
    // The FP8 GEMM's A, W and their scales: e4m3 codes and f32 vectors,
    // each apart from the others.
    const int64_t fp8Bytes[4] = {g.m * g.k, g.n * g.k, g.m * 4, g.n * 4};
    const Argument *fp8Args[4] = {&a[0], &a[1], nullptr, nullptr};
    if (g.fp8) {
      fp8Args[2] = &a[3 + g.beta];
      fp8Args[3] = &a[4 + g.beta];
      for (int i = 0; i < 4; ++i) {
        if (!inDequantized(*fp8Args[i], fp8Bytes[i]))
          return false;
        for (int j = 0; j < i; ++j)
          if (!apart(*fp8Args[i], fp8Bytes[i], *fp8Args[j], fp8Bytes[j]))
            return false;
      }
    } else if (a[0].region != Region::Arena ||
               !fits(a[0], g.m * g.k, 2, false) ||
               (a[1].region != Region::Weight &&
                !inDequantized(a[1], g.n * g.k * 2))) {
      return false;
    }
    if (!fits(a[2], g.m * g.n, size, !g.f16Out))
      return false;
    int64_t aBytes = g.fp8 ? 0 : g.m * g.k * 2, dBytes = g.m * g.n * size;
    bool inPlace =
        g.beta && a[3].region == a[2].region && a[3].offset == a[2].offset;
    return apart(a[0], aBytes, a[2], dBytes) &&
           (!g.beta || (fits(a[3], g.m * g.n, size, !g.f16Out) &&
                        (inPlace || apart(a[3], dBytes, a[2], dBytes))));
  };
  if (launch.kernel == kGemm && !gemmFits())
    return absl::InvalidArgumentError(absl::StrCat(
        "launch ", launch.name,
        ": a GEMM reads A [m, k] f16 in the arena and an f16 weight (or "
        "the dequantized one; the FP8 GEMM both as e4m3 codes with f32 "
        "scales in the dequantized region, apart), and writes D "
        "[m, n] (f32 in the workspace or the arena, f16 in the arena; C, "
        "when beta is 1, the same), D apart from A and C either D or apart "
        "from it; these do not fit"));
  if (launch.kernel == kGemm && launch.args[1].region == Region::Weight) {
    auto w = std::find_if(p.weights.begin(), p.weights.end(), [&](auto &e) {
      return e.name == launch.args[1].weight;
    });
    if (w->quant) // its codes are no f16 matrix
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", launch.name, ": a GEMM multiplies by weight '", w->name,
          "', which is ", w->quant->name(), ", not f16"));
    int64_t rows = 0;
    for (const WeightSource &src : w->sources)
      rows += src.shape.size() == 2 ? src.shape[0] : 1;
    if (rows != g.n || w->cols != g.k)
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", launch.name, " multiplies by weight '", w->name, "' as [",
          g.n, ", ", g.k, "]; it is [", rows, ", ", w->cols, "]"));
  }
  return launch;
}

/// Reads the Program back, checking every reference inside it.
absl::Status readProgram(const Json &j, Bundle &b) {
  Program &p = b.program;
  b.model = j.at("model").get<std::string>();
  if (auto lora = j.find("lora"); lora != j.end())
    b.lora = lora->get<std::vector<std::string>>();
  std::string text = j.at("config").dump();
  auto config = parseLlamaConfig(text, "config");
  if (!config.ok())
    return config.status();
  b.config = *config;
  p.vocab = jsonInteger<int64_t>(j.at("vocab"));
  p.maxPositions = jsonInteger<int64_t>(j.at("max_positions"));
  p.arenaBytes = jsonInteger<int64_t>(j.at("arena_bytes"));
  p.poolBytes = jsonInteger<int64_t>(j.at("pool").at("bytes"));
  p.poolBlocks = jsonInteger<int64_t>(j.at("pool").at("blocks"));
  p.blockSize = jsonInteger<int64_t>(j.at("pool").at("block_size"));
  p.sequences = jsonInteger<int64_t>(j.at("pool").at("sequences"));
  p.ranks = jsonInteger<int64_t>(j.at("ranks"));
  if (p.ranks < 1 || p.ranks > 64)
    return absl::InvalidArgumentError(absl::StrCat(
        "the program is split over ", p.ranks, " ranks (1 to 64)"));
  // Informational (the kernels are built for their cache); older bundles
  // lack it and hold f16.
  p.kvDtype = j.at("pool").value("kv_dtype", std::string("f16"));
  p.tableBlocks = jsonInteger<int64_t>(j.at("pool").at("table_blocks"));
  // Tables of 1 to 1024 sequences, each of at most the context's blocks
  // (fewer when compiled with --max-context).
  if (p.blockSize <= 0 || p.blockSize > p.maxPositions || p.sequences <= 0 ||
      p.sequences > 1024 || p.tableBlocks <= 0 ||
      p.tableBlocks > (p.maxPositions + p.blockSize - 1) / p.blockSize)
    return absl::InvalidArgumentError(absl::StrCat(
        "the KV pool's tables (", p.sequences, " sequences of ", p.tableBlocks,
        " blocks of ", p.blockSize, " tokens) do not fit a context of ",
        p.maxPositions, " tokens"));
  p.workspaceFloats = jsonInteger<int64_t>(j.at("workspace_floats"));
  p.counters = jsonInteger<int64_t>(j.at("counters"));
  p.dequantizedHalves = j.contains("dequantized_halves")
                            ? jsonInteger<int64_t>(j.at("dequantized_halves"))
                            : 0;
  // At most 2^40 halves (2 TiB): the offsets and sizes checked against it
  // stay inside int64_t.
  if (p.dequantizedHalves < 0 || p.dequantizedHalves > (int64_t(1) << 40))
    return absl::InvalidArgumentError(
        absl::StrCat("dequantized_halves is ", p.dequantizedHalves));
  for (const Json &k : j.at("kernels")) {
    p.kernels.push_back(
        {k.at("name").get<std::string>(), k.at("entry").get<std::string>(), "",
         k.value("provenance", std::string()), jsonInteger<int>(k.at("params")),
         k.contains("dynamic_shared")
             ? jsonInteger<int64_t>(k.at("dynamic_shared"))
             : 0});
    // No GPU lets a block hold more (maxSharedPerBlock).
    const int64_t shared = p.kernels.back().dynamicSharedBytes;
    if (shared < 0 || shared > maxSharedPerBlock("sm_90"))
      return absl::InvalidArgumentError(
          absl::StrCat("kernel ", p.kernels.back().name, " asks for ", shared,
                       " bytes of dynamic shared memory a block (0 to ",
                       maxSharedPerBlock("sm_90"), ")"));
  }
  std::map<std::string, bool> weightNames;
  for (const Json &w : j.at("weights")) {
    WeightBuffer buffer{w.at("name").get<std::string>(),
                        {},
                        jsonInteger<int64_t>(w.at("cols")),
                        w.at("scaled_by").get<std::string>()};
    for (const Json &s : w.at("sources")) {
      WeightSource source{s.at("name").get<std::string>(),
                          jsonIntegers<int64_t>(s.at("shape"))};
      if (s.contains("shard")) {
        source.shardAxis = jsonInteger<int64_t>(s.at("shard").at("axis"));
        source.shardParts = jsonInteger<int64_t>(s.at("shard").at("parts"));
        // A slice of rows or columns, in at most the ranks' parts.
        if (source.shardAxis < 0 ||
            source.shardAxis >= int64_t(source.shape.size()) ||
            source.shardParts < 1 || source.shardParts > p.ranks ||
            p.ranks % source.shardParts != 0)
          return absl::InvalidArgumentError(
              absl::StrCat("weight '", buffer.name, "': source '", source.name,
                           "' is a slice of axis ", source.shardAxis, " in ",
                           source.shardParts, " parts, which ", p.ranks,
                           " ranks cannot hold"));
      }
      buffer.sources.push_back(std::move(source));
    }
    if (w.contains("quant")) {
      std::string name = w.at("quant").get<std::string>();
      buffer.quant = QuantFormat::parse(name);
      if (!buffer.quant)
        return absl::InvalidArgumentError(absl::StrCat(
            "weight '", buffer.name, "' has quant '", name,
            "', which is not a format (", quantFormatChoices(), ")"));
      if (std::string e = quantShapeError(*buffer.quant, buffer.cols);
          !e.empty())
        return absl::InvalidArgumentError(absl::StrCat(
            "weight '", buffer.name, "' cannot be ", name, ": ", e));
    }
    weightNames[buffer.name] = true;
    p.weights.push_back(std::move(buffer));
  }
  p.decodeLogits = jsonInteger<int64_t>(j.at("decode").at("logits_offset"));
  for (const Json &l : j.at("decode").at("launches")) {
    auto launch = readLaunch(l, p, weightNames);
    if (!launch.ok())
      return launch.status();
    if (launch->kernel == kGemm || launch->when != LaunchWhen::Always)
      return absl::InvalidArgumentError(
          absl::StrCat("launch ", launch->name,
                       " of the decode plan is a GEMM or runs conditionally"));
    if (absl::Status s = checkCollective(*launch, 1, p); !s.ok())
      return s;
    p.decode.push_back(std::move(*launch));
  }
  p.prefillLogits = jsonInteger<int64_t>(j.at("prefill").at("logits_offset"));
  // Buckets of growing rows, each launch sized for its bucket.
  auto readPlans = [&](const Json &buckets, const char *what, int64_t most,
                       std::vector<StepPlan> &plans) -> absl::Status {
    for (const Json &bucket : buckets) {
      StepPlan plan{jsonInteger<int64_t>(bucket.at("rows")), {}};
      if (plan.rows <= 0 || plan.rows > most ||
          (!plans.empty() && plan.rows <= plans.back().rows))
        return absl::InvalidArgumentError(
            absl::StrCat(what, " bucket of ", plan.rows, " rows: buckets must ",
                         "grow and stay within ", most));
      for (const Json &l : bucket.at("launches")) {
        auto launch = readLaunch(l, p, weightNames);
        if (!launch.ok())
          return launch.status();
        if (absl::Status s = checkCollective(*launch, plan.rows, p); !s.ok())
          return s;
        if (launch->kernel == kGemm && launch->gemm.m != plan.rows)
          return absl::InvalidArgumentError(absl::StrCat(
              "launch ", launch->name, " multiplies ", launch->gemm.m,
              " rows in the ", what, " bucket of ", plan.rows, " rows"));
        // A batch plan is captured in a CUDA graph, which fixes its GEMMs'
        // sizes, and reads every row's logits.
        if (std::string(what) != "prefill" &&
            (launch->gemm.rows != GemmRows::All ||
             launch->when != LaunchWhen::Always))
          return absl::InvalidArgumentError(
              absl::StrCat("launch ", launch->name, " of a ", what,
                           " plan depends on the step's count or logits"));
        plan.launches.push_back(std::move(*launch));
      }
      plans.push_back(std::move(plan));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = readPlans(j.at("prefill").at("buckets"), "prefill",
                                 p.maxPositions, p.prefill);
      !s.ok())
    return s;
  if (p.prefill.empty())
    return absl::InvalidArgumentError("the program has no prefill bucket");
  if (absl::Status s =
          readPlans(j.at("batches"), "batch",
                    std::min(p.sequences, p.prefill.back().rows), p.batches);
      !s.ok())
    return s;
  return absl::OkStatus();
}

/// FNV-1a of the program and every blob (name and bytes, by name): a
/// bundle damaged where its structure still reads is refused, not run.
std::string checksum(const std::string &program,
                     const std::map<std::string, std::string_view> &blobs) {
  Fnv1a h;
  h.add(program);
  for (const auto &[name, bytes] : blobs)
    h.add(name).add(std::string_view("\0", 1)).add(bytes);
  return h.hex();
}

std::string blob(const TensorView &t) {
  return std::string(reinterpret_cast<const char *>(t.data), t.numBytes);
}
} // namespace

const char *regionName(Region region) {
  return regionNames().at(region).c_str();
}

bool looksLikeBundle(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char head[64] = {};
  in.read(head, sizeof head);
  return in.gcount() > 8 &&
         std::string(head + 8, size_t(in.gcount() - 8)).find("__metadata__") !=
             std::string::npos;
}

absl::Status writeBundle(const std::string &path, const Bundle &b) {
  std::vector<OutTensor> blobs;
  std::map<std::string, std::string_view> contents; // by name, for the sum
  auto add = [&](const std::string &name, const std::string &bytes) {
    blobs.push_back({name, DType::U8, {int64_t(bytes.size())}, bytes.data()});
    contents[name] = bytes;
  };
  for (const KernelCode &k : b.program.kernels)
    add("source/" + k.name, k.source);
  for (const auto &[kernel, targets] : b.cubin)
    for (const auto &[target, bytes] : targets)
      add("cubin/" + target + "/" + kernel, bytes);
  for (const auto &[kernel, targets] : b.ptx)
    for (const auto &[target, bytes] : targets)
      add("ptx/" + target + "/" + kernel, bytes);
  std::string program = programJson(b).dump(1);
  return writeSafeTensors(path, blobs,
                          {{"format", kFormat},
                           {"version", std::to_string(kBundleVersion)},
                           {"program", program},
                           {"nvrtc", b.nvrtc},
                           {"checksum", checksum(program, contents)}});
}

absl::StatusOr<Bundle> readBundle(const std::string &path) {
  auto file = SafeTensorsFile::open(path);
  if (!file.ok())
    return file.status();
  const auto &meta = (*file)->metadata();
  auto field = [&](const char *key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  auto fault = [&](const std::string &what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (field("format") != kFormat)
    return fault("not a kiln bundle (no format 'kiln-bundle' in its header)");
  if (field("version") != std::to_string(kBundleVersion))
    return fault(absl::StrCat("bundle format version '", field("version"),
                              "'; this kiln reads version ", kBundleVersion,
                              ": compile the model again"));
  Bundle b;
  b.nvrtc = field("nvrtc");
  try {
    if (absl::Status s = readProgram(Json::parse(field("program")), b); !s.ok())
      return fault(std::string(s.message()));
  } catch (const std::exception &e) {
    return fault(absl::StrCat("malformed program: ", jsonErrorMessage(e)));
  }
  for (KernelCode &k : b.program.kernels) {
    const TensorView *source = (*file)->find("source/" + k.name);
    if (!source || source->dtype != DType::U8)
      return fault("no source for kernel " + k.name);
    k.source = blob(*source);
  }
  for (const auto &[name, view] : (*file)->tensors()) {
    std::string n = name;
    for (const char *kind : {"cubin/", "ptx/"}) {
      if (n.rfind(kind, 0) != 0)
        continue;
      std::string rest = n.substr(strlen(kind));
      size_t slash = rest.find('/');
      if (slash == std::string::npos)
        return fault("malformed blob name '" + n + "'");
      auto &map = std::string(kind) == "cubin/" ? b.cubin : b.ptx;
      map[rest.substr(slash + 1)][rest.substr(0, slash)] = blob(view);
    }
  }
  // Last: the structure's own faults have the clearer messages.
  std::map<std::string, std::string_view> contents; // by name
  for (const auto &[name, view] : (*file)->tensors())
    contents[name] = std::string_view(reinterpret_cast<const char *>(view.data),
                                      view.numBytes);
  if (field("checksum") != checksum(field("program"), contents))
    return fault("damaged: its contents do not match its checksum "
                 "(compile the model again)");
  return b;
}

} // namespace kiln
