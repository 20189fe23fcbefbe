//===- kiln-run.cpp - a bundle on a GPU, with the runtime alone -----------===//
//
//   kiln-run model.kiln (--weights FOLDER | --random-weights)
//            --prompt-ids 1,2,3[;4,5,...] | --prompt-ids @FILE
//            | --prompt TEXT | --chat [--prompt TEXT | --conversation F]
//              [--system TEXT] [--stop TEXT]
//            [--max-new-tokens N] [--device cuda|emu] [--dump-logits F]
//            [--temperature T | --temperature-schedule T0:T1] [--top-k K]
//            [--top-p P] [--min-p M] [--seed S] [--logit-bias ID=B,...]
//            [--max-batch B] [--no-logits] [--repeat N] [--profile]
//
// Several prompts run as a batch, with continuous batching (at most B
// sequences at once, the bundle's --max-batch by default). For benchmarks,
// --repeat runs the requests N times on the same device and reports the
// last run: the first ones warm it up (modules loaded, cuBLAS's choices
// made, the decode graphs captured). --profile times every launch of the
// (last) run alone and prints each kernel's share of the prefill and
// decode steps.
//
//   kiln-run --time-candidates DIR [--device cuda|emu] [--repeats N]
//            [--measurements FILE]
//
// times the candidate bundles `kiln tune --emit-candidates DIR` wrote, on
// random weights, and writes DIR/measurements.json for `kiln tune
// --measurements` (runtime/TimeCandidates.h).
//
//   kiln-run --serve BUNDLE (--weights FOLDER | --random-weights)
//            [--device cuda|emu] [--fallback BUNDLE --fallback-weights F]
//            [--host H] [--port P] [the server's flags: docs/serve.md]
//
// serves the bundle over HTTP with OpenAI's API (serve/), as kiln serve.
//
// A bundle split over W ranks (kiln compile --tp W) runs its ranks as
// threads of this process; with --rendezvous HOST:PORT --rank R
// --world-size W [--rendezvous-timeout S], as a process a rank, on one
// machine or several (the same command on every rank but for --rank, as
// torchrun starts them): rank 0 runs the job, the others follow it
// (runtime/ProcessRanks.h).
//
// The runtime without the compiler (no MLIR, no LLVM), so that one binary,
// built with static Abseil and libstdc++, runs on another Linux machine
// with a CUDA driver: the GPU check (bench/gpu_check.sh) carries it there.
// Same flags, errors and report as `kiln run` on a bundle.
//
//===----------------------------------------------------------------------===//
#include "runtime/Bundle.h"
#include "runtime/BundleDevice.h"
#include "runtime/Chat.h"
#include "runtime/ChatTemplate.h"
#include "runtime/Isolated.h"
#include "runtime/ProcessRanks.h"
#include "runtime/Progress.h"
#include "runtime/RunOptions.h"
#include "runtime/SentencePieceBpe.h"
#include "runtime/TextStream.h"
#include "runtime/TimeCandidates.h"
#include "runtime/cuda/CudaDevice.h"
#include "serve/ModelLoad.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include <unistd.h>

using namespace kiln;

namespace {
int fail(const absl::Status &status, int code = 1) {
  std::fprintf(stderr, "kiln-run: error: %s\n",
               std::string(status.message()).c_str());
  return code;
}

const char *kUsage =
    "usage: kiln-run BUNDLE (--weights FOLDER | --random-weights) "
    "(--prompt-ids 1,2,3[;4,5,...]|@FILE | --prompt TEXT | --chat "
    "[--prompt TEXT | --conversation FILE.json] [--system TEXT]) "
    "[--stop TEXT] [--tokenizer FILE.model] "
    "[--max-new-tokens N] [--device cuda|emu] [--dump-logits FILE] "
    "[--temperature T | --temperature-schedule T0:T1] [--top-k K] "
    "[--top-p P] [--min-p M] [--seed S] "
    "[--repetition-penalty R] [--presence-penalty P] [--frequency-penalty F] "
    "[--logit-bias ID=BIAS,...|@FILE.json] "
    "[--stop-ids 2,13] [--max-batch B] [--no-logits] [--repeat N] "
    "[--profile] [--rendezvous HOST:PORT --rank R --world-size W "
    "[--rendezvous-timeout S]]; or "
    "kiln-run --serve BUNDLE (--weights FOLDER | --random-weights) "
    "[--device cuda|emu] [--tokenizer FILE.model] [--fallback BUNDLE "
    "(--fallback-weights FOLDER | --random-weights)] "
    "[--max-batch B] [server flags: --host, --port, --api-key, "
    "--rate-limit, --max-queue, --max-tokens-cap, --drain-seconds, ...]; or "
    "kiln-run --time-candidates DIR [--device cuda|emu] [--repeats N] "
    "[--measurements FILE]";

/// --rendezvous, --rank, --world-size and --rendezvous-timeout checked;
/// no address when not given. The digest is the bundle's.
absl::StatusOr<ProcessRankOptions>
processRanks(std::map<std::string, std::string> &flags,
             const std::set<std::string> &given, const std::string &bundle) {
  ProcessRankOptions o;
  if (flags["rendezvous"].empty()) {
    for (const char *f : {"rank", "world-size", "rendezvous-timeout"})
      if (given.count(f))
        return absl::InvalidArgumentError(absl::StrCat(
            "--", f, ": needs --rendezvous HOST:PORT (ranks as processes)"));
    return o;
  }
  RendezvousOptions &r = o.rendezvous;
  r.address = flags["rendezvous"];
  int64_t seconds = 0;
  if (!given.count("world-size"))
    return absl::InvalidArgumentError(
        "--rendezvous: needs --world-size W and --rank R");
  if (!absl::SimpleAtoi(flags["rank"], &r.rank))
    return absl::InvalidArgumentError(
        absl::StrCat("--rank: '", flags["rank"], "' is not a rank"));
  if (!absl::SimpleAtoi(flags["world-size"], &r.worldSize))
    return absl::InvalidArgumentError(absl::StrCat(
        "--world-size: '", flags["world-size"], "' is not a number of ranks"));
  if (!absl::SimpleAtoi(flags["rendezvous-timeout"], &seconds) || seconds < 1 ||
      seconds > 86400)
    return absl::InvalidArgumentError(
        absl::StrCat("--rendezvous-timeout: '", flags["rendezvous-timeout"],
                     "' is not from 1 to 86400 seconds"));
  r.timeout = std::chrono::seconds(seconds);
  if (absl::Status s = checkRendezvous(r); !s.ok())
    return s;
  auto digest = bundleDigest(bundle);
  if (!digest.ok())
    return digest.status();
  r.digest = *digest;
  return o;
}

/// kiln-run --time-candidates: every candidate bundle's cases timed on
/// `device`, the measurements written atomically.
int timeCandidatesMain(const std::string &dir, const std::string &device,
                       const std::string &repeatsFlag, std::string output) {
  int64_t repeats = 0;
  if (!absl::SimpleAtoi(repeatsFlag, &repeats) || repeats < 1 || repeats > 1000)
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--repeats: '", repeatsFlag, "' is not from 1 to 1000")),
                2);
  std::string manifest = dir + "/candidates.json";
  if (output.empty())
    output = dir + "/measurements.json";
  TimingOptions options;
  options.repeats = repeats;
  options.device = device;
  // Every bundle runs in a child process (a sticky fault costs one
  // candidate), so this process never touches the GPU: the probe too runs
  // in a child.
  options.isolate = true;
  if (device == "cuda") {
    auto gpu = runIsolated([]() -> absl::StatusOr<std::string> {
      auto gpu = probeCudaGpu();
      if (!gpu.ok())
        return gpu.status();
      return gpu->name + "\n" + gpu->driver;
    });
    if (!gpu.ok())
      return fail(gpu.status());
    size_t newline = gpu->find('\n');
    options.device = gpu->substr(0, newline);
    options.driver =
        newline == std::string::npos ? "" : gpu->substr(newline + 1);
    options.source = "cuda-events";
  } else {
    options.driver = "none";
    options.source = "emu-clock";
  }
  std::optional<Progress> progress; // "kiln: time  40% (12 of 30 bundles)"
  options.progress = [&](int64_t done, int64_t total, const std::string &) {
    if (!progress)
      progress.emplace("time", total, 0, "bundles");
    progress->update(done);
  };
  DeviceFactory open = [&](Bundle &b) {
    return openBundleDevice(b, device, WeightProvider::random(1));
  };
  // What is measured so far, in case a time box stops the run: removed
  // when the run ends (the whole file replaces it, or an error does).
  std::string partial = output + ".partial";
  options.partial = [&](const MeasurementSet &m) {
    (void)writeMeasurementSet(partial, m);
  };
  auto measured = timeCandidates(manifest, open, options);
  progress.reset();
  std::remove(partial.c_str());
  if (!measured.ok())
    return fail(measured.status());
  if (absl::Status s = writeMeasurementSet(output, *measured); !s.ok())
    return fail(s);
  int64_t rejected = 0, failed = 0;
  for (const Measurement &m : measured->candidates) {
    rejected += m.rejected;
    failed += !m.error.empty();
  }
  std::string didNotRun =
      failed ? absl::StrCat(" (", failed, " did not run)") : "";
  std::printf("kiln-run: timed %zu candidate cases and %zu default cases on "
              "%s (%s, %lld repeats): %lld rejected%s; %s\n",
              measured->candidates.size(), measured->defaults.size(),
              measured->device.c_str(), measured->source.c_str(),
              (long long)repeats, (long long)rejected, didNotRun.c_str(),
              output.c_str());
  return 0;
}
/// kiln-run --serve: the bundle (and a fallback) behind the server.
int serveMain(const std::string &bundlePath,
              std::map<std::string, std::string> &flags,
              const std::set<std::string> &given) {
  for (const char *prompt :
       {"prompt-ids", "prompt", "conversation", "system", "dump-logits",
        "repeat", "stop", "stop-ids", "logit-bias"})
    if (given.count(prompt))
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      "--", prompt,
                      ": a server takes prompts and their settings from its "
                      "requests")),
                  2);
  for (const char *sw : {"chat", "profile", "no-logits"})
    if (flags[sw] == "true")
      return fail(absl::InvalidArgumentError(
                      absl::StrCat("--", sw, ": not a server flag")),
                  2);
  serve::ServeOptions options;
  for (const std::string &name : given)
    if (absl::Status s = serve::setServeFlag(options, name, flags[name]);
        !s.ok() && !absl::IsNotFound(s))
      return fail(s, 2);
  if (!absl::SimpleAtoi(flags["max-batch"], &options.maxBatch) ||
      options.maxBatch < 0)
    return fail(absl::InvalidArgumentError(
                    absl::StrCat("--max-batch: '", flags["max-batch"],
                                 "' is not a batch size (0: the bundle's)")),
                2);
  bool random = flags["random-weights"] == "true";
  const std::string &device = flags["device"];
  if (device != "cuda" && device != "emu")
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--device: '", device, "' is not cuda or emu")),
                2);
  auto ranks = processRanks(flags, given, bundlePath);
  if (!ranks.ok())
    return fail(ranks.status(), 2);
  serve::ModelSourceFlags main{bundlePath, flags["weights"],   random,
                               device,     flags["tokenizer"], *ranks};
  serve::ModelSourceFlags fallback{
      flags["fallback"], flags["fallback-weights"], random, device, "", {}};
  if (ranks->rendezvous.rank > 0) {
    // Rank 0 serves; this rank follows its steps until it stops.
    if (absl::Status s = serve::followServedBundle(main); !s.ok())
      return fail(s);
    return 0;
  }
  if (!fallback.path.empty() && fallback.weights.empty() == !random)
    return fail(absl::InvalidArgumentError(
                    "--fallback: name its weights with --fallback-weights "
                    "(or serve both on --random-weights)"),
                2);
  if (fallback.path.empty() && !fallback.weights.empty())
    return fail(absl::InvalidArgumentError(
                    "--fallback-weights: needs --fallback BUNDLE"),
                2);
  int64_t maxBatch = options.maxBatch;
  serve::ModelLoader loadFallback;
  if (!fallback.path.empty())
    loadFallback = [=] { return serve::loadBundle(fallback, maxBatch); };
  return serve::serve(
      options, [=] { return serve::loadBundle(main, maxBatch); }, loadFallback);
}
} // namespace

int main(int argc, char **argv) {
  std::map<std::string, std::string> flags = {{"weights", ""},
                                              {"prompt-ids", ""},
                                              {"max-new-tokens", "16"},
                                              {"device", "cuda"},
                                              {"dump-logits", ""},
                                              {"temperature", "0"},
                                              {"top-k", "0"},
                                              {"top-p", "1"},
                                              {"seed", "0"},
                                              {"random-weights", "false"},
                                              {"repetition-penalty", "1"},
                                              {"presence-penalty", "0"},
                                              {"frequency-penalty", "0"},
                                              {"min-p", "0"},
                                              {"temperature-schedule", ""},
                                              {"logit-bias", ""},
                                              {"prompt", ""},
                                              {"chat", "false"},
                                              {"system", ""},
                                              {"conversation", ""},
                                              {"stop", ""},
                                              {"tokenizer", ""},
                                              {"stop-ids", ""},
                                              {"max-batch", "0"},
                                              {"no-logits", "false"},
                                              {"profile", "false"},
                                              {"repeat", "1"},
                                              {"time-candidates", ""},
                                              {"repeats", "10"},
                                              {"measurements", ""},
                                              {"serve", "false"},
                                              {"fallback", ""},
                                              {"fallback-weights", ""},
                                              {"rendezvous", ""},
                                              {"rank", "0"},
                                              {"world-size", "0"},
                                              {"rendezvous-timeout", "300"}};
  for (const serve::ServeFlag *f = serve::kServeFlags; f->name; ++f)
    flags[f->name] = "";
  std::string bundlePath;
  std::set<std::string> given; // the flags the command line sets
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s\n", kUsage);
      return 0;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!bundlePath.empty())
        return fail(
            absl::InvalidArgumentError(absl::StrCat(
                "two bundles: '", bundlePath, "' and '", arg, "'; ", kUsage)),
            2);
      bundlePath = arg;
      continue;
    }
    std::string name = arg.substr(2), value;
    if (name == "random-weights" || name == "no-logits" || name == "profile" ||
        name == "chat" || name == "serve") { // switches
      flags[name] = "true";
      continue;
    }
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return fail(absl::InvalidArgumentError(
                      absl::StrCat("--", name, ": needs a value")),
                  2);
    }
    if (!flags.count(name))
      return fail(absl::InvalidArgumentError(
                      absl::StrCat("unknown flag --", name, "; ", kUsage)),
                  2);
    flags[name] = value;
    given.insert(name);
  }
  if (!flags["time-candidates"].empty()) {
    if (!bundlePath.empty() || !flags["weights"].empty() ||
        !flags["prompt-ids"].empty())
      return fail(absl::InvalidArgumentError(
                      "--time-candidates runs the candidates' bundles on "
                      "random weights and fixed tokens: name no bundle, "
                      "--weights or --prompt-ids"),
                  2);
    if (flags["device"] != "cuda" && flags["device"] != "emu")
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      "--device: '", flags["device"], "' is not cuda or emu")),
                  2);
    return timeCandidatesMain(flags["time-candidates"], flags["device"],
                              flags["repeats"], flags["measurements"]);
  }
  bool random = flags["random-weights"] == "true";
  if (bundlePath.empty() || flags["weights"].empty() == !random)
    return fail(
        absl::InvalidArgumentError(absl::StrCat(
            "name the bundle, and --weights or --random-weights; ", kUsage)),
        2);
  if (flags["serve"] == "true")
    return serveMain(bundlePath, flags, given);
  for (const serve::ServeFlag *f = serve::kServeFlags; f->name; ++f)
    if (given.count(f->name))
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      "--", f->name, ": a server flag (with --serve)")),
                  2);
  if (!flags["fallback"].empty() || !flags["fallback-weights"].empty())
    return fail(
        absl::InvalidArgumentError("--fallback: a server flag (with --serve)"),
        2);
  // Text (--prompt, --chat) goes through the weights folder's
  // tokenizer.model, read by the runtime's own SentencePiece BPE.
  const bool chat = flags["chat"] == "true";
  const bool textual = chat || !flags["prompt"].empty();
  if (textual && !flags["prompt-ids"].empty())
    return fail(absl::InvalidArgumentError(
                    "--prompt-ids: give the prompt one way (--prompt, --chat "
                    "or --prompt-ids)"),
                2);
  if (!chat && (!flags["system"].empty() || !flags["conversation"].empty()))
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    flags["system"].empty() ? "--conversation" : "--system",
                    ": needs --chat")),
                2);
  if (!textual && !flags["stop"].empty())
    return fail(absl::InvalidArgumentError(
                    "--stop: stop strings need a text prompt (--prompt or "
                    "--chat)"),
                2);
  const bool interactive =
      chat && flags["prompt"].empty() && flags["conversation"].empty();
  if (interactive && !flags["dump-logits"].empty())
    return fail(absl::InvalidArgumentError(
                    "--dump-logits: an interactive chat writes no logits"),
                2);
  std::unique_ptr<SentencePieceBpe> tokenizer;
  absl::StatusOr<std::vector<std::vector<int32_t>>> prompts =
      std::vector<std::vector<int32_t>>();
  if (textual) {
    std::string path = flags["tokenizer"];
    if (path.empty())
      path = flags["weights"] + "/tokenizer.model";
    auto opened = SentencePieceBpe::open(path);
    if (!opened.ok())
      return fail(opened.status());
    tokenizer = std::move(*opened);
    std::vector<ChatMessage> dialog;
    if (!flags["conversation"].empty()) {
      auto read = readConversation(flags["conversation"]);
      if (!read.ok())
        return fail(read.status());
      dialog = std::move(*read);
    }
    if (absl::Status s =
            addSystem(dialog, flags["system"], flags["conversation"]);
        !s.ok())
      return fail(s, 2);
    if (!flags["prompt"].empty())
      dialog.push_back({"user", flags["prompt"]});
    if (!chat) {
      std::vector<int32_t> ids = {tokenizer->bos()};
      std::vector<int32_t> text = tokenizer->encodeText(flags["prompt"]);
      ids.insert(ids.end(), text.begin(), text.end());
      prompts->push_back(std::move(ids));
    } else if (!interactive) {
      auto ids = llama2ChatTokens(
          *tokenizer, dialog,
          flags["conversation"].empty() ? "--prompt" : flags["conversation"]);
      if (!ids.ok())
        return fail(ids.status());
      prompts->push_back(std::move(*ids));
    }
  } else {
    prompts = parsePromptIds(flags["prompt-ids"]);
  }
  if (!prompts.ok())
    return fail(prompts.status(), 2);
  int64_t maxBatch = 0;
  if (!absl::SimpleAtoi(flags["max-batch"], &maxBatch) || maxBatch < 0)
    return fail(absl::InvalidArgumentError(
                    absl::StrCat("--max-batch: '", flags["max-batch"],
                                 "' is not a batch size (0: the bundle's)")),
                2);
  int64_t repeat = 1;
  if (!absl::SimpleAtoi(flags["repeat"], &repeat) || repeat < 1 || repeat > 100)
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--repeat: '", flags["repeat"], "' is not from 1 to 100")),
                2);
  if (textual && repeat > 1)
    return fail(absl::InvalidArgumentError(
                    "--repeat: runs token-id prompts (benchmarks), not text"),
                2);
  bool keepLogits = flags["no-logits"] != "true";
  if (!keepLogits && !flags["dump-logits"].empty())
    return fail(absl::InvalidArgumentError(
                    "--no-logits: there are no logits for --dump-logits"),
                2);
  auto maxNew = parseMaxNewTokens(flags["max-new-tokens"]);
  if (!maxNew.ok())
    return fail(maxNew.status(), 2);
  if (given.count("temperature") && !flags["temperature-schedule"].empty())
    return fail(absl::InvalidArgumentError(
                    "--temperature-schedule: sets the temperature; give "
                    "--temperature or the schedule"),
                2);
  auto sampling =
      parseSampling({flags["temperature"], flags["top-k"], flags["top-p"],
                     flags["seed"], flags["repetition-penalty"],
                     flags["presence-penalty"], flags["frequency-penalty"],
                     flags["min-p"], flags["temperature-schedule"], *maxNew});
  if (!sampling.ok())
    return fail(sampling.status(), 2);
  const std::string &device = flags["device"];
  if (device != "cuda" && device != "emu")
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--device: '", device, "' is not cuda or emu")),
                2);

  auto ranks = processRanks(flags, given, bundlePath);
  if (!ranks.ok())
    return fail(ranks.status(), 2);
  const bool ranksAsProcesses = !ranks->rendezvous.address.empty();
  auto bundle = readBundle(bundlePath);
  if (!bundle.ok())
    return fail(bundle.status());
  if (absl::Status s = checkMaxBatch(maxBatch, bundle->program); !s.ok())
    return fail(s, 2);
  const LlamaConfig &c = bundle->config;
  for (const std::vector<int32_t> &prompt : *prompts)
    if (absl::Status s =
            checkPrompt(prompt, *maxNew, c.vocabSize,
                        std::max(c.maxPositions, bundle->program.maxPositions));
        !s.ok())
      return fail(namePromptFlag(s, !flags["conversation"].empty()
                                        ? "conversation"
                                    : textual ? "prompt"
                                              : "prompt-ids"));
  std::unique_ptr<WeightSet> weights;
  if (!random) {
    auto opened =
        openCheckpoint(flags["weights"], manifestSpecs(bundle->program.weights),
                       bundle->lora, c.headDim());
    if (!opened.ok())
      return fail(opened.status());
    weights = std::move(*opened);
  }
  WeightProvider provider =
      random ? WeightProvider::random(1) : WeightProvider::checkpoint(*weights);
  absl::StatusOr<std::unique_ptr<PlanDevice>> dev;
  if (ranksAsProcesses) {
    ranks->device = device;
    if (ranks->rendezvous.rank > 0) {
      // Every rank but 0 follows rank 0's steps until it ends the run.
      if (absl::Status s = followAsRank(*bundle, weights.get(), *ranks);
          !s.ok())
        return fail(s);
      return 0;
    }
    dev = openRankZero(*bundle, weights.get(), *ranks);
  } else {
    dev = openBundleDevice(*bundle, device, provider);
  }
  if (!dev.ok())
    return fail(dev.status());
  auto stopIds = parseStopIds(flags["stop-ids"], c.vocabSize);
  if (!stopIds.ok())
    return fail(stopIds.status(), 2);
  auto bias = parseLogitBias(flags["logit-bias"], c.vocabSize);
  if (!bias.ok())
    return fail(bias.status(), 2);
  const int64_t context =
      std::max(c.maxPositions, bundle->program.maxPositions);
  std::vector<std::string> stops;
  if (!flags["stop"].empty())
    stops.push_back(flags["stop"]);
  if (interactive) {
    ChatOptions options{c.vocabSize, context, *maxNew,         *sampling,
                        *bias,       stops,   flags["system"], isatty(0) != 0};
    auto turns = chatTurns(**dev, *tokenizer, options, std::cin, std::cout);
    std::cout.flush();
    if (!turns.ok())
      return fail(turns.status());
    std::fputs(chatReport(bundle->model, (*dev)->name(), *turns).c_str(),
               stdout);
    return 0;
  }
  std::vector<Request> requests;
  for (std::vector<int32_t> &prompt : *prompts)
    requests.push_back(
        {std::move(prompt), *maxNew, *sampling, *bias, {*stopIds, nullptr}});
  // A text prompt's continuation streams out until the end-of-sequence
  // token or a stop string (a chat's reply alone; a prompt after itself).
  std::unique_ptr<TextStream> stream;
  if (tokenizer) {
    Request &r = requests[0];
    stream = std::make_unique<TextStream>(
        *tokenizer, r.prompt,
        [](const std::string &piece) {
          std::fputs(piece.c_str(), stdout);
          std::fflush(stdout);
        },
        stops);
    r.hooks.stopTokens.push_back(tokenizer->eos());
    r.hooks.onToken = [&](int32_t t) { return stream->add(t); };
    if (!chat)
      std::fputs(flags["prompt"].c_str(), stdout);
  }
  absl::StatusOr<RunResult> run;
  RunProfile profile;
  for (int64_t i = 0; i < repeat; ++i) {
    if (i == repeat - 1 && flags["profile"] == "true")
      (*dev)->timeLaunches(&profile.prefill, &profile.decode);
    run = runRequests(**dev, c.vocabSize, context, requests,
                      {maxBatch, keepLogits});
    if (!run.ok())
      return fail(run.status());
  }
  if (stream) {
    stream->finish();
    std::fputs("\n", stdout);
  }
  std::string report;
  absl::Status finished = finishRun(*run, bundle->model, (*dev)->name(),
                                    *sampling, flags["dump-logits"], report);
  report += profileReport(profile);
  std::fputs(report.c_str(), stdout);
  return finished.ok() ? 0 : fail(finished);
}
