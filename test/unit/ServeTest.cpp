//===- ServeTest.cpp - the server's parts, without a network model --------===//
//
// The metrics' text format, the token bucket, OpenAI's request fields, the
// engine on a scripted device (tokens, cancellation, failures and the
// health probe), and /health over HTTP from loading to unhealthy. The
// whole server against the fixtures is test/e2e/serve.test.
//
//===----------------------------------------------------------------------===//
#include "runtime/PlanDevice.h"
#include "serve/Engine.h"
#include "serve/Metrics.h"
#include "serve/OpenAiRequest.h"
#include "serve/RateLimiter.h"
#include "serve/Server.h"

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <future>
#include <thread>

using namespace kiln;
using namespace kiln::serve;

namespace {

/// A PlanDevice whose every draw is token 5, and whose steps fail while
/// `failing` is set.
class ScriptedDevice : public PlanDevice {
public:
  explicit ScriptedDevice(int64_t poolBlocks = 4)
      : PlanDevice(program(poolBlocks)) {}
  std::string name() const override { return "scripted"; }
  std::atomic<bool> failing{false};

private:
  static Program program(int64_t poolBlocks) {
    Program p;
    p.vocab = 8;
    p.maxPositions = 32;
    p.sequences = 2;
    p.tableBlocks = 2;
    p.poolBlocks = poolBlocks;
    p.blockSize = 16;
    p.arenaBytes = 1 << 20;
    p.poolBytes = 3 << 20;
    p.workspaceFloats = 256;
    p.kernels.push_back({"k", "k", "", "layers.0", 3});
    Launch kernel{0, "layers.0", {1, 1, 1}, 32, {}, {}};
    p.decode = {kernel};
    p.prefill = {StepPlan{16, {kernel}}};
    p.batches = {StepPlan{2, {kernel}}};
    return p;
  }
  absl::Status sendInputs(int64_t) override { return absl::OkStatus(); }
  absl::Status sendTables() override { return absl::OkStatus(); }
  absl::Status sendLogitBias(int32_t) override { return absl::OkStatus(); }
  absl::Status run(const std::vector<Launch> &) override {
    return failing ? absl::InternalError("an illegal address (scripted)")
                   : absl::OkStatus();
  }
  absl::Status clearHistory(int32_t) override { return absl::OkStatus(); }
  absl::Status readLogits(int64_t, float *, size_t) override {
    return absl::OkStatus();
  }
  absl::Status readSampled(int64_t rows) override {
    sampled_.assign(rows, 5);
    return absl::OkStatus();
  }
};

/// Waits (bounded) for `done`.
template <class F> bool eventually(F done, double seconds = 10) {
  auto until = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(int64_t(seconds * 1000));
  while (!done()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

EngineOptions engineOptions(int64_t maxQueue = 64, int64_t maxBatch = 0,
                            int stepDelayMs = 0, int probeMs = 30000) {
  EngineOptions o;
  o.model = "m";
  o.maxQueue = maxQueue;
  o.maxBatch = maxBatch;
  o.stepDelay = std::chrono::milliseconds(stepDelayMs);
  o.probeInterval = std::chrono::milliseconds(probeMs);
  return o;
}

Request request(std::vector<int32_t> prompt, int64_t n) {
  Request r;
  r.prompt = std::move(prompt);
  r.maxNewTokens = n;
  return r;
}

/// A sink that records the tokens and the end.
struct Recorder {
  std::mutex mutex;
  std::vector<int32_t> tokens;
  std::promise<JobEnd> ended;
  JobSink sink() {
    return {[this](int32_t t) {
              std::lock_guard<std::mutex> lock(mutex);
              tokens.push_back(t);
            },
            [this](const JobEnd &e) { ended.set_value(e); }};
  }
  JobEnd end() {
    auto f = ended.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  }
};

} // namespace

TEST(Metrics, WritesPrometheusText) {
  Metrics m;
  m.add("kiln_generation_tokens_total", {{"model", "a\"b\\c"}}, 3);
  m.add("kiln_generation_tokens_total", {{"model", "a\"b\\c"}}, 2);
  m.observe("kiln_time_to_first_token_seconds", {{"model", "m"}}, 0.003);
  m.observe("kiln_time_to_first_token_seconds", {{"model", "m"}}, 7);
  std::string text = m.text();
  EXPECT_NE(text.find("# TYPE kiln_generation_tokens_total counter\n"),
            std::string::npos);
  EXPECT_NE(
      text.find("kiln_generation_tokens_total{model=\"a\\\"b\\\\c\"} 5\n"),
      std::string::npos)
      << text;
  // Buckets count every sample at or below their bound.
  EXPECT_NE(text.find("kiln_time_to_first_token_seconds_bucket{model=\"m\","
                      "le=\"0.0025\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kiln_time_to_first_token_seconds_bucket{model=\"m\","
                      "le=\"0.005\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("kiln_time_to_first_token_seconds_bucket{model=\"m\","
                      "le=\"10\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("kiln_time_to_first_token_seconds_sum{model=\"m\"} "
                      "7.003\n"),
            std::string::npos);
  // A family never touched still says what it is.
  EXPECT_NE(text.find("# TYPE kiln_errors_total counter"), std::string::npos);
  EXPECT_EQ(m.value("kiln_time_to_first_token_seconds", {{"model", "m"}}), 2);
}

TEST(RateLimiter, ABucketPerKey) {
  EXPECT_FALSE(parseRateLimit("0").ok());
  EXPECT_FALSE(parseRateLimit("2,0.5").ok());
  EXPECT_FALSE(parseRateLimit("fast").ok());
  auto limit = parseRateLimit("1,2");
  ASSERT_TRUE(limit.ok());
  RateLimiter r(*limit);
  auto t0 = RateLimiter::Clock::now();
  EXPECT_EQ(r.take("a", t0), 0);
  EXPECT_EQ(r.take("a", t0), 0);
  EXPECT_DOUBLE_EQ(r.take("a", t0), 1.0); // empty: a token in a second
  EXPECT_EQ(r.take("b", t0), 0);          // b's bucket is its own
  EXPECT_NEAR(r.take("a", t0 + std::chrono::milliseconds(500)), 0.5, 1e-9);
  EXPECT_EQ(r.take("a", t0 + std::chrono::milliseconds(1000)), 0);
  EXPECT_EQ(RateLimiter({}).take("a", t0), 0); // no limit
}

TEST(OpenAiRequest, ReadsTheFields) {
  ApiRequest api;
  ASSERT_FALSE(parseApiRequest(
      R"({"model": "m", "prompt": [1, 5, 6], "max_tokens": 3, "top_p": 0.5,
          "top_k": -1, "min_p": 0.1, "seed": -1, "stop": ["a", "bb"],
          "presence_penalty": 1, "frequency_penalty": -1.5,
          "logit_bias": {"7": -100}, "stream": true, "n": 1,
          "stream_options": {"include_usage": true}, "user": "x"})",
      Endpoint::Completions, api));
  EXPECT_EQ(api.model, "m");
  EXPECT_EQ(api.promptIds, (std::vector<int32_t>{1, 5, 6}));
  EXPECT_EQ(*api.maxTokens, 3);
  EXPECT_FLOAT_EQ(api.sampling.temperature, 1); // OpenAI's default
  EXPECT_FLOAT_EQ(api.sampling.topP, 0.5);
  EXPECT_EQ(api.sampling.topK, 0);
  EXPECT_EQ(*api.seed, 0xffffffffu);
  EXPECT_EQ(api.stop, (std::vector<std::string>{"a", "bb"}));
  EXPECT_FLOAT_EQ(api.sampling.frequencyPenalty, -1.5);
  EXPECT_EQ(api.logitBias.size(), 1u);
  EXPECT_TRUE(api.stream && api.includeUsage);
  ASSERT_FALSE(parseApiRequest(
      R"({"messages": [{"role": "user", "content": [{"type": "text",
          "text": "hi "}, {"type": "text", "text": "there"}]}]})",
      Endpoint::ChatCompletions, api));
  EXPECT_EQ(api.messages[0].content, "hi there");
}

TEST(OpenAiRequest, RefusesWhatItDoesNotDo) {
  struct Case {
    const char *body;
    const char *code, *param;
  } cases[] = {
      {"{", "invalid_json", ""},
      {"[1]", "invalid_json", ""},
      {R"({})", "missing_required", "prompt"},
      {R"({"prompt": "x", "temperature": "hot"})", "invalid_type",
       "temperature"},
      {R"({"prompt": "x", "temperature": 3})", "invalid_value", "temperature"},
      {R"({"prompt": "x", "max_tokens": 2.5})", "invalid_type", "max_tokens"},
      {R"({"prompt": "x", "n": 2})", "unsupported_parameter", "n"},
      {R"({"prompt": "x", "best_of": 3})", "unsupported_parameter", "best_of"},
      {R"({"prompt": "x", "logprobs": 2})", "unsupported_parameter",
       "logprobs"},
      {R"({"prompt": "x", "echo": true})", "unsupported_parameter", "echo"},
      {R"({"prompt": "x", "suffix": "y"})", "unsupported_parameter", "suffix"},
      {R"({"prompt": ["a", "b"]})", "unsupported_parameter", "prompt"},
      {R"({"prompt": [1, -2]})", "invalid_type", "prompt"},
      {R"({"prompt": "x", "stop": ["a","b","c","d","e"]})", "invalid_value",
       "stop"},
      {R"({"prompt": "x", "stop": [""]})", "invalid_value", "stop"},
      {R"({"prompt": "x", "logit_bias": {"3": 101}})", "invalid_value",
       "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"x": 1}})", "invalid_value",
       "logit_bias"},
      {R"({"prompt": "x", "stream": "yes"})", "invalid_type", "stream"},
      {R"({"prompt": "x", "model": 7})", "invalid_type", "model"},
  };
  for (const Case &c : cases) {
    ApiRequest api;
    auto e = parseApiRequest(c.body, Endpoint::Completions, api);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->status, 400) << c.body;
    EXPECT_EQ(e->code, c.code) << c.body << ": " << e->message;
    EXPECT_EQ(e->param, c.param) << c.body;
  }
  ApiRequest api;
  auto e = parseApiRequest(R"({"messages": [{"role": "user", "content": 3}]})",
                           Endpoint::ChatCompletions, api);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "messages[0].content");
  auto tools = parseApiRequest(
      R"({"messages": [{"role": "user", "content": "x"}], "tools": []})",
      Endpoint::ChatCompletions, api);
  ASSERT_TRUE(tools);
  EXPECT_EQ(tools->code, "unsupported_parameter");
  nlohmann::json body = nlohmann::json::parse(errorBody(*tools));
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "tools");
}

TEST(OpenAiRequest, PreparesForTheModel) {
  ModelInfo model{"m", 8, 32, nullptr, 2};
  auto prepare = [&](const std::string &body, int64_t cap,
                     PreparedRequest &out) {
    ApiRequest api;
    auto e = parseApiRequest(body, Endpoint::Completions, api);
    EXPECT_FALSE(e) << body;
    return prepareRequest(api, model, cap, out);
  };
  PreparedRequest p;
  ASSERT_FALSE(prepare(R"({"prompt": [1, 2, 3], "seed": 9})", 0, p));
  EXPECT_EQ(p.request.maxNewTokens, 29); // the rest of the context
  EXPECT_EQ(p.request.sampling.seed, 9u);
  EXPECT_EQ(p.request.hooks.stopTokens, std::vector<int32_t>{2});
  ASSERT_FALSE(prepare(R"({"prompt": [1, 2, 3], "max_tokens": 20,
                          "ignore_eos": true})",
                       8, p));
  EXPECT_EQ(p.request.maxNewTokens, 8); // --max-tokens-cap
  EXPECT_TRUE(p.request.hooks.stopTokens.empty());
  auto e = prepare(R"({"prompt": [1, 2, 3], "max_tokens": 30})", 0, p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_EQ(e->param, "max_tokens");
  e = prepare(R"({"prompt": [1, 9]})", 0, p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "prompt");
  e = prepare(R"({"prompt": [1], "logit_bias": {"8": 1}})", 0, p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "logit_bias");
  e = prepare(R"({"prompt": "text"})", 0, p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "no_tokenizer");
}

TEST(Engine, StreamsTokensAndEnds) {
  ScriptedDevice device;
  Metrics metrics;
  Engine engine(device, engineOptions(), metrics);
  Recorder r;
  ASSERT_TRUE(engine.submit(request({1, 2, 3}, 4), r.sink()).ok());
  JobEnd end = r.end();
  EXPECT_TRUE(end.status.ok()) << end.status;
  EXPECT_TRUE(end.length);
  EXPECT_EQ(end.generated, 4);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 5, 5, 5}));
  EXPECT_TRUE(eventually([&] { return engine.idle(); }));
  EXPECT_EQ(metrics.value("kiln_generation_tokens_total", {{"model", "m"}}), 4);
  EXPECT_EQ(metrics.value("kiln_time_to_first_token_seconds", {{"model", "m"}}),
            1);
  EXPECT_EQ(metrics.value("kiln_inter_token_latency_seconds", {{"model", "m"}}),
            3);
}

TEST(Engine, CancelFreesTheBlocksAndTheQueueIsBounded) {
  ScriptedDevice device;
  Metrics metrics;
  // One sequence at a time, slow steps: a runs, b waits, and both are
  // still there when they are cancelled.
  Engine engine(device,
                engineOptions(/*maxQueue=*/1, /*maxBatch=*/1,
                              /*stepDelayMs=*/5),
                metrics);
  Recorder a, b;
  auto ta = engine.submit(request({1, 2, 3}, 28), a.sink());
  ASSERT_TRUE(ta.ok());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(a.mutex);
    return !a.tokens.empty();
  }));
  EXPECT_GT(metrics.value("kiln_kv_blocks_used", {{"model", "m"}}), 0);
  auto tb = engine.submit(request({1, 2, 3, 4}, 28), b.sink());
  ASSERT_TRUE(tb.ok());
  // One running, one waiting: the queue of 1 is full until b runs.
  EXPECT_EQ(engine.waiting(), 1);
  Recorder c;
  EXPECT_TRUE(absl::IsResourceExhausted(
      engine.submit(request({1}, 1), c.sink()).status()));
  engine.cancel(*ta, absl::CancelledError("the client left"));
  engine.cancel(*tb, absl::CancelledError("the client left"));
  EXPECT_TRUE(absl::IsCancelled(a.end().status));
  EXPECT_TRUE(absl::IsCancelled(b.end().status));
  EXPECT_TRUE(eventually([&] {
    return engine.idle() &&
           metrics.value("kiln_kv_blocks_used", {{"model", "m"}}) == 0;
  }));
  EXPECT_EQ(metrics.value("kiln_requests_total",
                          {{"model", "m"}, {"finish", "cancelled"}}),
            2);
}

TEST(Engine, ARequestThePoolCannotHoldFailsAlone) {
  ScriptedDevice device(/*poolBlocks=*/1); // 16 tokens in all
  Metrics metrics;
  Engine engine(device, engineOptions(), metrics);
  Recorder small, large;
  ASSERT_TRUE(engine.submit(request({1, 2, 3}, 4), small.sink()).ok());
  std::vector<int32_t> prompt(20, 3); // two blocks: never fits
  ASSERT_TRUE(engine.submit(request(prompt, 4), large.sink()).ok());
  JobEnd failed = large.end();
  EXPECT_TRUE(absl::IsResourceExhausted(failed.status)) << failed.status;
  JobEnd ok = small.end();
  EXPECT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_EQ(ok.generated, 4);
}

TEST(Engine, UnhealthyAfterFiveFailuresInARow) {
  ScriptedDevice device;
  Metrics metrics;
  std::atomic<bool> probeFails{false};
  EngineOptions options = engineOptions(64, 0, 0, /*probeMs=*/1);
  options.probe = [&]() -> absl::StatusOr<PlanDevice::Memory> {
    if (probeFails)
      return absl::UnavailableError("no answer (scripted)");
    return PlanDevice::Memory{1000, 2000};
  };
  Engine engine(device, options, metrics);
  // A failed step fails its request alone, with the device's error.
  device.failing = true;
  Recorder r;
  ASSERT_TRUE(engine.submit(request({1, 2}, 3), r.sink()).ok());
  JobEnd end = r.end();
  EXPECT_EQ(end.status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(end.status.message().find("illegal address"), std::string::npos);
  device.failing = false;
  EXPECT_TRUE(engine.health().healthy); // one failure, then a good probe
  probeFails = true;
  ASSERT_TRUE(eventually([&] { return !engine.health().healthy; }));
  Health h = engine.health();
  EXPECT_NE(h.why.find("the probe failed: no answer (scripted)"),
            std::string::npos)
      << h.why;
  EXPECT_NE(h.why.find("failures in a row"), std::string::npos);
  EXPECT_EQ(metrics.value("kiln_device_healthy", {{"model", "m"}}), 0);
  probeFails = false;
  EXPECT_TRUE(eventually([&] { return engine.health().healthy; }));
  EXPECT_EQ(metrics.value("kiln_device_memory_free_bytes", {{"model", "m"}}),
            1000);
}

TEST(Server, HealthFromLoadingToUnhealthy) {
  namespace asio = boost::asio;
  namespace http = boost::beast::http;
  asio::io_context io(1);
  Metrics metrics;
  ServeOptions options;
  options.port = 0;
  Server server(io, options, metrics);
  auto at = server.listen();
  ASSERT_TRUE(at.ok()) << at.status();
  std::thread thread([&] { io.run(); });
  auto health = [&]() {
    asio::io_context client;
    asio::ip::tcp::socket socket(client);
    socket.connect(*at);
    http::request<http::empty_body> req{http::verb::get, "/health", 11};
    http::write(socket, req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return std::make_pair(int(res.result_int()),
                          nlohmann::json::parse(res.body()));
  };
  auto [loading, body] = health();
  EXPECT_EQ(loading, 503);
  EXPECT_EQ(body["status"], "loading");

  std::atomic<bool> probeFails{false};
  ServedModel model;
  model.loaded.device = std::make_unique<ScriptedDevice>();
  EngineOptions options2 = engineOptions(64, 0, 0, /*probeMs=*/1);
  options2.probe = [&]() -> absl::StatusOr<PlanDevice::Memory> {
    if (probeFails)
      return absl::UnavailableError("no answer (scripted)");
    return PlanDevice::Memory();
  };
  model.engine =
      std::make_unique<Engine>(*model.loaded.device, options2, metrics);
  model.info = {"m", 8, model.engine->context(), nullptr, 2};
  asio::post(io, [&] { server.ready(&model, nullptr); });
  ASSERT_TRUE(eventually([&] { return health().first == 200; }));
  EXPECT_EQ(health().second["model"], "m");
  probeFails = true;
  ASSERT_TRUE(eventually([&] { return health().first == 503; }));
  auto [code, unhealthy] = health();
  EXPECT_EQ(unhealthy["status"], "unhealthy");
  EXPECT_NE(unhealthy["reason"].get<std::string>().find("no answer"),
            std::string::npos);
  asio::post(io, [&] { server.drain(); }); // nothing runs: it stops at once
  thread.join();
  model.engine.reset();
}
