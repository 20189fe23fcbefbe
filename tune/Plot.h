//===- Plot.h - time against sequence length, as SVG ------------*- C++ -*-===//
#ifndef KILN_TUNE_PLOT_H
#define KILN_TUNE_PLOT_H

#include "tune/TuningDb.h"

#include <string>

namespace kiln {

/// An SVG of `entry`: time (log scale) against sequence length (log 2
/// scale) for the best candidates (every bucket's winner, at most six
/// lines), with the bucket boundaries marked and labelled by their knobs.
/// The same entry always gives the same bytes.
std::string plotEntry(const TuningEntry &entry);

} // namespace kiln

#endif // KILN_TUNE_PLOT_H
