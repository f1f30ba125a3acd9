#pragma once
// Launch bounds, computed on the host from the launch's argument slots when they depend only on
// constants and arguments: a parallel task's trip count (to size the grid), and how many
// iterations each serial loop construct runs (for devices that stop long loops).
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ir.h"

namespace qd {

// nullopt when the bounds read memory (or use floats): the caller then launches a grid that fills
// the device, and the grid-stride loop covers whatever the range turns out to be.
std::optional<int64_t> range_length(const Task &task, const std::vector<int64_t> &args);

// Whether launching the task can do anything: a parallel task, or a serial one with an effect
// (offload leaves effect-free serial tasks where a kernel starts by reading its arguments).
bool has_effects(const Task &task);

// The serial loop of a task that runs the most iterations in total per run of the task's body
// (one parallel iteration, or the serial task): its own trip count times those of the serial loops
// around it. Loops whose iteration count is not known on the host (bounds from memory or an outer
// loop's index, a break) are left out; `loop` is null when no loop is known.
struct LoopLoad {
  const Stmt *loop = nullptr;
  int64_t iterations = 0;
};
LoopLoad heaviest_serial_loop(const Task &task, const std::vector<int64_t> &args);

}  // namespace qd
