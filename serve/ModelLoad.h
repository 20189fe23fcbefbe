//===- ModelLoad.h - a bundle or a tokenizer opened for serving -*- C++ -*-===//
//
// What kiln serve (on a bundle) and kiln-run --serve share: the bundle's
// device with the checkpoint's (or random) weights, and the tokenizer.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SERVE_MODELLOAD_H
#define KILN_SERVE_MODELLOAD_H

#include "runtime/ProcessRanks.h"
#include "serve/ServeOptions.h"

namespace kiln::serve {

/// Where a served model comes from.
struct ModelSourceFlags {
  std::string path;      // a bundle (or, for kiln serve, a model)
  std::string weights;   // the checkpoint folder, or empty
  bool random = false;   // --random-weights
  std::string device;    // "cuda" or "emu" (resolved from "auto")
  std::string tokenizer; // --tokenizer, or empty: WEIGHTS/tokenizer.model
  /// A split bundle's ranks as processes (--rendezvous): this one is rank
  /// 0 (no address: the ranks are threads).
  ProcessRankOptions ranks;
};

/// The tokenizer for text: --tokenizer when given, else the weights
/// folder's tokenizer.model when there is one, else none (the server
/// then takes token ids only, and says so on stderr).
absl::StatusOr<std::unique_ptr<TextTokenizer>>
openServeTokenizer(const std::string &flag, const std::string &folder);

/// Opens a bundle on its device with its weights, as kiln-run does;
/// `maxBatch` is checked against its sequence slots.
absl::StatusOr<LoadedModel> loadBundle(const ModelSourceFlags &source,
                                       int64_t maxBatch);

/// Rank R > 0 of a bundle served by rank 0 (kiln-run --serve --rendezvous):
/// follows rank 0's steps until it ends the run.
absl::Status followServedBundle(const ModelSourceFlags &source);

} // namespace kiln::serve

#endif // KILN_SERVE_MODELLOAD_H
