//===- Program.h - what a device runs: kernels, buffers, launches -*- C++
//-*-===//
//
// The compiler's output as the runtime sees it, with no MLIR: the kernels'
// code, the weight manifest, the memory plan (arena, KV pool) and the
// decode step's launches with every argument bound to a buffer. The bundle
// (kiln compile -o model.kiln) will be this, written down.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_PROGRAM_H
#define KILN_RUNTIME_PROGRAM_H

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// Where an argument points.
enum class Region {
  Arena,      // activations, at an offset in bytes
  Weight,     // the weight buffer named by `weight`
  Pool,       // the KV pool, at an offset in bytes
  Tokens,     // int32 token ids of the step
  Positions,  // int32 positions of the step
  BlockTable, // int32 block table of the sequence
  Workspace,  // float scratch
  Counters,   // uint32 counters, zero between launches
  Sampled,    // int32: the token the step's sampling kernel chose
};

struct Argument {
  Region region;
  int64_t offset;     // bytes, for Arena and Pool
  std::string weight; // for Weight

  Argument(Region region, int64_t offset = 0, std::string weight = "")
      : region(region), offset(offset), weight(std::move(weight)) {}
};

struct KernelCode {
  std::string name;       // kiln.kernel
  std::string entry;      // the extern "C" function
  std::string source;     // CUDA C++
  std::string provenance; // kiln.name of its first op: where it comes from
  int params = 0;         // how many arguments every launch passes
};

struct Launch {
  int kernel;       // index into Program::kernels
  std::string name; // kiln.name: the op's provenance
  std::array<int64_t, 3> grid;
  int64_t blockThreads;
  std::vector<Argument> args;
};

/// A checkpoint tensor a weight buffer is built from.
struct WeightSource {
  std::string name;
  std::vector<int64_t> shape;
};

/// One weight buffer: the `sources` (each [rows, cols], or [cols]) stacked
/// row after row, the columns scaled by the [cols] tensor `scaledBy` when
/// set (a folded RMSNorm weight), stored as f16.
struct WeightBuffer {
  std::string name;
  std::vector<WeightSource> sources;
  int64_t cols = 0;
  std::string scaledBy;
};

struct Program {
  std::vector<KernelCode> kernels;
  std::vector<WeightBuffer> weights;
  int64_t vocab = 0, maxPositions = 0;
  int64_t arenaBytes = 0;
  int64_t poolBytes = 0, poolBlocks = 0, blockSize = 0;
  int64_t workspaceFloats = 0, counters = 0;
  std::vector<Launch> decode; // one new token, ending with its sampling
  int64_t decodeLogits = 0;   // arena offset of the [1, V] f32 logits
};

} // namespace kiln

#endif // KILN_RUNTIME_PROGRAM_H
