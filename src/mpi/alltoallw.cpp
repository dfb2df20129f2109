// MPI_Alltoallw and MPI_Ialltoallw (MPI 3.1 sections 5.8, 5.12.6): an all-to-all exchange in
// which every block has its own datatype and a displacement in bytes.
//
// Blocks are packed into one contiguous stream, exchanged by the byte-level all-to-all
// (Communicator::alltoallv_bytes, so the collective's algorithm and policy checks apply), and
// unpacked block by block. The copies are the price of arbitrary per-block types; programs
// that need zero-copy use MPI_Alltoallv with one contiguous type.

#include <vector>

#include "mpi/collective_form.hpp"
#include "mpi/mpi_impl.hpp"

namespace sempi::mpi {
namespace {

// One side's blocks as (bytes, offset) in a packed stream.
struct PackedLayout {
  std::vector<std::size_t> bytes;
  std::vector<std::size_t> displs;
  std::vector<std::shared_ptr<const TypeMap>> types;
  std::size_t total = 0;
};

PackedLayout layout_of(int n, const void* buf, const int counts[], const int displs[],
                       const MPI_Datatype types[]) {
  require_input(counts, "array of counts");
  require_input(displs, "array of displacements");
  require_input(types, "array of datatypes");
  PackedLayout l;
  for (int i = 0; i < n; ++i) {
    check_count(counts[i]);
    const auto& type = type_of(types[i]);
    if (missing_buffer(buf, counts[i], *type, displs[i])) {
      fail(MPI_ERR_BUFFER, "null buffer for block " + std::to_string(i));
    }
    const auto bytes = static_cast<std::size_t>(data_bytes(counts[i], *type));
    l.bytes.push_back(bytes);
    l.displs.push_back(l.total);
    l.types.push_back(type);
    l.total += bytes;
  }
  return l;
}

int alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
              const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
              const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
              const Form& form) {
  return guarded_collective(comm, detail::OpKind::alltoall, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    const int n = c.size();
    // IN_PLACE: the blocks sent are the receive buffer's current contents; packing them first
    // copies them before anything arrives.
    const bool in_place = sendbuf == MPI_IN_PLACE;
    if (recvbuf == MPI_IN_PLACE) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is not valid for recvbuf");
    const void* sbuf = in_place ? recvbuf : sendbuf;
    const PackedLayout out = in_place ? layout_of(n, sbuf, recvcounts, rdispls, recvtypes)
                                      : layout_of(n, sbuf, sendcounts, sdispls, sendtypes);
    const int* scounts = in_place ? recvcounts : sendcounts;
    const int* sdisp = in_place ? rdispls : sdispls;
    auto in =
        std::make_shared<const PackedLayout>(layout_of(n, recvbuf, recvcounts, rdispls, recvtypes));

    std::vector<Staging> staging(2);  // packed blocks out, packed blocks in
    staging[0].allocate(out.total);
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      out.types[k]->pack(at(sbuf, sdisp[i]), scounts[i], staging[0].data.get() + out.displs[k]);
    }
    staging[1].allocate(in->total);
    // A nonblocking call's arrays may change once it returns: the unpack keeps copies.
    Unpack unpack = [recvbuf, in, counts = std::vector<int>(recvcounts, recvcounts + n),
                     where =
                         std::vector<int>(rdispls, rdispls + n)](const std::vector<Staging>& s) {
      for (std::size_t k = 0; k < counts.size(); ++k) {
        in->types[k]->unpack(s[1].data.get() + in->displs[k],
                             static_cast<std::int64_t>(in->bytes[k]), counts[k],
                             at(recvbuf, where[k]));
      }
    };
    const std::byte* send = staging[0].data.get();
    std::byte* recv = staging[1].data.get();
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] { c.alltoallv_bytes(send, out.bytes, out.displs, recv, in->bytes, in->displs); },
        [&] {
          return c.ialltoallv_bytes(send, out.bytes, out.displs, recv, in->bytes, in->displs);
        });
  });
}

}  // namespace
}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                   comm, blocking("MPI_Alltoallw"));
}

int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request) {
  return alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                   comm, {"MPI_Ialltoallw", true, request});
}

}  // extern "C"
