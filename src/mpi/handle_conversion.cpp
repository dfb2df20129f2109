// Handle conversion between C and Fortran (MPI 3.1 section 17.2.4): MPI_Comm_c2f / _f2c and
// their kin for datatypes, groups, requests, operations, info objects and error handlers.
//
// C handles are pointers; a Fortran handle (MPI_Fint) is an int. Each handle kind has a table
// that gives a handle its number when it is first converted: 0 is the null handle, 1 onwards
// index the table. A handle keeps its number until the process ends, also after it is freed
// (its address may come back as a new handle, which then gets the same number); the table
// therefore grows with the number of distinct handle addresses converted, not with calls.
// MPI_*_f2c of a number no handle was given returns the null handle.

#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "mpi/mpi_impl.hpp"

namespace sempi::mpi {
namespace {

template <class Handle>
class FortranHandles {
 public:
  MPI_Fint to_fortran(Handle handle) {
    if (handle == nullptr) return 0;
    std::lock_guard lock(mu_);
    const auto [it, inserted] = numbers_.try_emplace(handle, 0);
    if (inserted) {
      if (handles_.size() > static_cast<std::size_t>(std::numeric_limits<MPI_Fint>::max())) {
        numbers_.erase(it);
        return 0;  // out of Fortran numbers: MPI_*_c2f has no error return
      }
      it->second = static_cast<MPI_Fint>(handles_.size());
      handles_.push_back(handle);
    }
    return it->second;
  }

  Handle to_c(MPI_Fint number) {
    std::lock_guard lock(mu_);
    if (number <= 0 || static_cast<std::size_t>(number) >= handles_.size()) return nullptr;
    return handles_[static_cast<std::size_t>(number)];
  }

 private:
  std::mutex mu_;
  std::vector<Handle> handles_{nullptr};  // index: Fortran number; 0 is the null handle
  std::unordered_map<Handle, MPI_Fint> numbers_;
};

// One table per kind, built on first use (no order-of-initialisation question at load time).
template <class Handle>
FortranHandles<Handle>& table() {
  static FortranHandles<Handle> handles;
  return handles;
}

}  // namespace
}  // namespace sempi::mpi

using sempi::mpi::table;

extern "C" {

MPI_Fint MPI_Comm_c2f(MPI_Comm comm) { return table<MPI_Comm>().to_fortran(comm); }
MPI_Comm MPI_Comm_f2c(MPI_Fint comm) { return table<MPI_Comm>().to_c(comm); }

MPI_Fint MPI_Type_c2f(MPI_Datatype datatype) {
  return table<MPI_Datatype>().to_fortran(datatype);
}
MPI_Datatype MPI_Type_f2c(MPI_Fint datatype) { return table<MPI_Datatype>().to_c(datatype); }

MPI_Fint MPI_Group_c2f(MPI_Group group) { return table<MPI_Group>().to_fortran(group); }
MPI_Group MPI_Group_f2c(MPI_Fint group) { return table<MPI_Group>().to_c(group); }

MPI_Fint MPI_Request_c2f(MPI_Request request) {
  return table<MPI_Request>().to_fortran(request);
}
MPI_Request MPI_Request_f2c(MPI_Fint request) { return table<MPI_Request>().to_c(request); }

MPI_Fint MPI_Op_c2f(MPI_Op op) { return table<MPI_Op>().to_fortran(op); }
MPI_Op MPI_Op_f2c(MPI_Fint op) { return table<MPI_Op>().to_c(op); }

MPI_Fint MPI_Info_c2f(MPI_Info info) { return table<MPI_Info>().to_fortran(info); }
MPI_Info MPI_Info_f2c(MPI_Fint info) { return table<MPI_Info>().to_c(info); }

MPI_Fint MPI_Errhandler_c2f(MPI_Errhandler errhandler) {
  return table<MPI_Errhandler>().to_fortran(errhandler);
}
MPI_Errhandler MPI_Errhandler_f2c(MPI_Fint errhandler) {
  return table<MPI_Errhandler>().to_c(errhandler);
}

}  // extern "C"
