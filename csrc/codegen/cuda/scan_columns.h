// The ScanColumns shape's body, printed from its plan (schedule/cuda/scan_columns.h): a
// thread a row, consecutive threads consecutive rows; the scanned dim in segments, one
// per group of the block's threads; segment totals (pass 1), their carries through
// shared memory, then the stage over the segment from the carries (pass 2).
#pragma once
#include <string>
#include <vector>

#include "codegen/cuda/printer.h"
#include "schedule/cuda/scan_columns.h"

namespace ember {

std::vector<std::string> scan_columns_body(CudaPrinter& pr, const ScanColumns& plan);

}  // namespace ember
