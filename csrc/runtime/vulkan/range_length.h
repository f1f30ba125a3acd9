#pragma once
// The trip count of a parallel task's loop, computed on the host from the launch's argument slots
// when the bounds depend only on constants and arguments, so that the grid can be sized to it.
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ir.h"

namespace qd {

// nullopt when the bounds read memory (or use floats): the caller then launches a grid that fills
// the device, and the grid-stride loop covers whatever the range turns out to be.
std::optional<int64_t> range_length(const Task &task, const std::vector<int64_t> &args);

}  // namespace qd
