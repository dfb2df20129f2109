// MPI_Type_get_envelope and MPI_Type_get_contents, and the table of envelopes behind them.

#include "mpi/datatype_envelope.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "mpi/mpi_impl.hpp"

namespace sempi::mpi {
namespace {

struct EnvelopeTable {
  std::mutex mu;
  std::map<const sempi_mpi_datatype*, std::shared_ptr<const Envelope>> entries;
};

// Never destroyed: handles still alive at exit must not outlive the table they are in.
EnvelopeTable& table() {
  static auto* t = new EnvelopeTable;
  return *t;
}

// A handle equivalent to the argument type `held` for MPI_Type_get_contents: predefined types
// are returned as they are, derived ones as a new handle with the same layout and envelope.
MPI_Datatype handle_for_caller(const std::shared_ptr<sempi_mpi_datatype>& held) {
  sempi_mpi_datatype* type = held.get();
  if (type->predefined) return type;
  auto copy = std::make_unique<sempi_mpi_datatype>();
  copy->map = type->map;
  copy->committed = type->committed.load();
  if (auto envelope = envelope_of(type)) record_envelope(copy.get(), std::move(envelope));
  return copy.release();
}

}  // namespace

void record_envelope(MPI_Datatype type, std::shared_ptr<const Envelope> envelope) {
  auto& t = table();
  std::lock_guard lock(t.mu);
  t.entries[type] = std::move(envelope);
}

std::shared_ptr<const Envelope> envelope_of(MPI_Datatype type) {
  auto& t = table();
  std::lock_guard lock(t.mu);
  const auto it = t.entries.find(type);
  return it == t.entries.end() ? nullptr : it->second;
}

void forget_envelope(MPI_Datatype type) noexcept {
  std::shared_ptr<const Envelope> dropped;
  {
    auto& t = table();
    std::lock_guard lock(t.mu);
    const auto it = t.entries.find(type);
    if (it == t.entries.end()) return;
    dropped = std::move(it->second);
    t.entries.erase(it);
  }
  // Released outside the lock: the last reference to an argument type deletes that handle,
  // which forgets its own envelope in turn.
  dropped.reset();
}

}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses,
                          int* num_datatypes, int* combiner) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_get_envelope", [&] {
    type_of(datatype, false);
    require_output(num_integers, "num_integers");
    require_output(num_addresses, "num_addresses");
    require_output(num_datatypes, "num_datatypes");
    require_output(combiner, "combiner");
    const auto envelope = envelope_of(datatype);
    if (!envelope) {
      *num_integers = *num_addresses = *num_datatypes = 0;
      *combiner = MPI_COMBINER_NAMED;
      return;
    }
    *num_integers = static_cast<int>(envelope->integers.size());
    *num_addresses = static_cast<int>(envelope->addresses.size());
    *num_datatypes = static_cast<int>(envelope->types.size());
    *combiner = envelope->combiner;
  });
}

int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses,
                          int max_datatypes, int array_of_integers[],
                          MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_get_contents", [&] {
    type_of(datatype, false);
    const auto envelope = envelope_of(datatype);
    if (!envelope) fail(MPI_ERR_TYPE, "a predefined datatype has no contents (MPI_COMBINER_NAMED)");
    const auto& e = *envelope;
    if (max_integers < static_cast<int>(e.integers.size()) ||
        max_addresses < static_cast<int>(e.addresses.size()) ||
        max_datatypes < static_cast<int>(e.types.size())) {
      fail(MPI_ERR_ARG, "the arrays are smaller than MPI_Type_get_envelope says they must be (" +
                            std::to_string(e.integers.size()) + " integers, " +
                            std::to_string(e.addresses.size()) + " addresses, " +
                            std::to_string(e.types.size()) + " datatypes)");
    }
    if (!e.integers.empty()) require_output(array_of_integers, "array_of_integers");
    if (!e.addresses.empty()) require_output(array_of_addresses, "array_of_addresses");
    if (!e.types.empty()) require_output(array_of_datatypes, "array_of_datatypes");
    std::copy(e.integers.begin(), e.integers.end(), array_of_integers);
    std::copy(e.addresses.begin(), e.addresses.end(), array_of_addresses);
    // All new handles or none: one that fails to be made frees those made before it.
    std::vector<MPI_Datatype> handles;
    try {
      for (const auto& held : e.types) handles.push_back(handle_for_caller(held));
    } catch (...) {
      for (MPI_Datatype h : handles) {
        if (!h->predefined) release_type(h);
      }
      throw;
    }
    std::copy(handles.begin(), handles.end(), array_of_datatypes);
  });
}

}  // extern "C"
