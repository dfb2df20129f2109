#pragma once
// How many processors this process may use: its affinity mask (taskset, a container's cpuset,
// a Slurm allocation), not every processor of the machine.

#include <functional>
#include <span>
#include <string>

namespace sempi {

/// Logical CPUs (hardware threads) in this process's affinity mask; at least 1.
int usable_cpus();

/// Processor cores among those CPUs (hardware threads of one core count once, as Open MPI
/// counts a host's slots); at least 1. A CPU whose topology cannot be read counts as a core.
int usable_cores();

/// The cores among `cpus`, given each CPU's list of the hardware threads of its core as the
/// kernel writes it ("0,4", "0-1"; empty: unknown, a core of its own); at least 1.
int cores_among(std::span<const int> cpus, const std::function<std::string(int)>& core_siblings);

}  // namespace sempi
