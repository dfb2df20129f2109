// Info objects, continued (MPI 3.1 section 9): MPI_Info_dup and the calls that enumerate keys
// and size values, so a library can copy or inspect an info object it did not create.
// Keys are enumerated in sorted order, which is stable while the object is not modified.

#include <cstring>
#include <iterator>

#include "mpi/mpi_impl.hpp"

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_dup", [&] {
    auto& h = info_of(info);
    require_output(newinfo, "newinfo");
    auto* copy = new sempi_mpi_info;
    {
      std::lock_guard lock(h.mu);
      copy->entries = h.entries;
    }
    *newinfo = copy;
  });
}

int MPI_Info_get_nthkey(MPI_Info info, int n, char* key) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_get_nthkey", [&] {
    auto& h = info_of(info);
    require_output(key, "key");
    std::lock_guard lock(h.mu);
    if (n < 0 || static_cast<std::size_t>(n) >= h.entries.size()) {
      fail(MPI_ERR_ARG, "key number " + std::to_string(n) + " is out of range (the info object "
                        "has " + std::to_string(h.entries.size()) + " keys)");
    }
    const std::string& k = std::next(h.entries.begin(), n)->first;
    // Keys are at most MPI_MAX_INFO_KEY characters (MPI_Info_set checks), so they fit.
    std::memcpy(key, k.c_str(), k.size() + 1);
  });
}

int MPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_get_valuelen", [&] {
    auto& h = info_of(info);
    require_info_key(key);
    require_output(valuelen, "valuelen");
    require_output(flag, "flag");
    std::lock_guard lock(h.mu);
    const auto it = h.entries.find(key);
    *flag = it == h.entries.end() ? 0 : 1;
    if (it != h.entries.end()) *valuelen = static_cast<int>(it->second.size());
  });
}

}  // extern "C"
