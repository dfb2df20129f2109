// MPI datatype constructors and queries, MPI_Pack / MPI_Unpack, addresses.

#include <climits>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "mpi/datatype_envelope.hpp"
#include "mpi/mpi_impl.hpp"

namespace sempi::mpi {
namespace {

// The two arrays of an indexed or struct type constructor (null only for count 0).
template <class Displacement>
void require_arrays(int count, const int blocklengths[], const Displacement displacements[]) {
  if (count == 0) return;
  require_input(blocklengths, "array_of_blocklengths");
  require_input(displacements, "array_of_displacements");
}

void check_lengths(int count, const int blocklengths[]) {
  for (int i = 0; i < count; ++i) {
    if (blocklengths[i] < 0) {
      fail(MPI_ERR_ARG, "negative block length " + std::to_string(blocklengths[i]));
    }
  }
}

// The envelope of a constructor call: its integer and address arguments, in the standard's
// order, and its argument types (kept alive while the new type is).
Envelope envelope(int combiner, std::vector<int> integers, std::vector<MPI_Aint> addresses,
                  std::initializer_list<MPI_Datatype> types) {
  Envelope e{combiner, std::move(integers), std::move(addresses), {}};
  for (MPI_Datatype t : types) e.types.push_back(retain_type(t));
  return e;
}

// `count` entries of `values` (null only for zero) appended to `out`.
template <class T>
void append(std::vector<T>& out, const T values[], int count) {
  if (count > 0) out.insert(out.end(), values, values + count);
}

// A new handle for `map`, made by the constructor call `made_by` describes.
MPI_Datatype new_type(std::shared_ptr<const TypeMap> map, Envelope made_by) {
  auto t = std::make_unique<sempi_mpi_datatype>();
  t->map = std::move(map);
  record_envelope(t.get(), std::make_shared<const Envelope>(std::move(made_by)));
  return t.release();
}

std::shared_ptr<const TypeMap> subarray(int ndims, const int sizes[], const int subsizes[],
                                        const int starts[], int order, const TypeMap& old) {
  // Dimension k of the loop below runs from the fastest-varying one outwards.
  auto dim = [&](int k) { return order == MPI_ORDER_C ? ndims - 1 - k : k; };
  std::shared_ptr<const TypeMap> t;
  std::int64_t stride = old.extent();
  std::int64_t offset = 0;
  for (int k = 0; k < ndims; ++k) {
    const int d = dim(k);
    t = k == 0 ? TypeMap::hvector(1, subsizes[d], 0, old)
               : TypeMap::hvector(subsizes[d], 1, stride, *t);
    offset = checked_add(offset, checked_mul(starts[d], stride));
    stride = checked_mul(stride, sizes[d]);
  }
  const std::vector<std::int64_t> one{1};
  const std::vector<std::int64_t> at_start{offset};
  t = TypeMap::hindexed(one, at_start, *t);
  // The subarray's extent is the whole array's, so consecutive ones tile it.
  return TypeMap::resized(*t, 0, stride);
}

}  // namespace
}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_contiguous", [&] {
    const auto& old = type_of(oldtype, false);
    check_count(count);
    require_output(newtype, "newtype");
    *newtype = new_type(TypeMap::hvector(1, count, 0, *old),
                        envelope(MPI_COMBINER_CONTIGUOUS, {count}, {}, {oldtype}));
  });
}

int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                    MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_vector", [&] {
    const auto& old = type_of(oldtype, false);
    check_count(count);
    check_lengths(1, &blocklength);
    require_output(newtype, "newtype");
    const std::int64_t byte_stride = checked_mul(stride, old->extent());
    *newtype = new_type(TypeMap::hvector(count, blocklength, byte_stride, *old),
                        envelope(MPI_COMBINER_VECTOR, {count, blocklength, stride}, {}, {oldtype}));
  });
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_create_hvector", [&] {
    const auto& old = type_of(oldtype, false);
    check_count(count);
    check_lengths(1, &blocklength);
    require_output(newtype, "newtype");
    *newtype = new_type(TypeMap::hvector(count, blocklength, stride, *old),
                        envelope(MPI_COMBINER_HVECTOR, {count, blocklength}, {stride}, {oldtype}));
  });
}

int MPI_Type_indexed(int count, const int blocklengths[], const int displacements[],
                     MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_indexed", [&] {
    const auto& old = type_of(oldtype, false);
    check_count(count);
    require_arrays(count, blocklengths, displacements);
    check_lengths(count, blocklengths);
    std::vector<std::int64_t> lengths(blocklengths, blocklengths + count);
    std::vector<std::int64_t> displs(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      displs[static_cast<std::size_t>(i)] = checked_mul(displacements[i], old->extent());
    }
    std::vector<int> integers{count};
    append(integers, blocklengths, count);
    append(integers, displacements, count);
    require_output(newtype, "newtype");
    *newtype = new_type(TypeMap::hindexed(lengths, displs, *old),
                        envelope(MPI_COMBINER_INDEXED, std::move(integers), {}, {oldtype}));
  });
}

int MPI_Type_create_hindexed(int count, const int blocklengths[], const MPI_Aint displacements[],
                             MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_create_hindexed", [&] {
    const auto& old = type_of(oldtype, false);
    check_count(count);
    require_arrays(count, blocklengths, displacements);
    check_lengths(count, blocklengths);
    std::vector<std::int64_t> lengths(blocklengths, blocklengths + count);
    std::vector<std::int64_t> displs(displacements, displacements + count);
    std::vector<int> integers{count};
    append(integers, blocklengths, count);
    std::vector<MPI_Aint> addresses;
    append(addresses, displacements, count);
    require_output(newtype, "newtype");
    *newtype = new_type(TypeMap::hindexed(lengths, displs, *old),
                        envelope(MPI_COMBINER_HINDEXED, std::move(integers),
                                 std::move(addresses), {oldtype}));
  });
}

int MPI_Type_create_indexed_block(int count, int blocklength, const int displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_create_indexed_block", [&] {
    const auto& old = type_of(oldtype, false);
    check_count(count);
    check_lengths(1, &blocklength);
    if (count > 0) require_input(displacements, "array_of_displacements");
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(count), blocklength);
    std::vector<std::int64_t> displs(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      displs[static_cast<std::size_t>(i)] = checked_mul(displacements[i], old->extent());
    }
    std::vector<int> integers{count, blocklength};
    append(integers, displacements, count);
    require_output(newtype, "newtype");
    *newtype = new_type(TypeMap::hindexed(lengths, displs, *old),
                        envelope(MPI_COMBINER_INDEXED_BLOCK, std::move(integers), {}, {oldtype}));
  });
}

// Equal-length blocks at byte displacements (MPI 3.1 section 4.1.2).
int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_create_hindexed_block", [&] {
    const auto& old = type_of(oldtype, false);
    check_count(count);
    check_lengths(1, &blocklength);
    if (count > 0) require_input(displacements, "array_of_displacements");
    const std::vector<std::int64_t> lengths(static_cast<std::size_t>(count), blocklength);
    const std::vector<std::int64_t> displs(displacements, displacements + count);
    std::vector<MPI_Aint> addresses;
    append(addresses, displacements, count);
    require_output(newtype, "newtype");
    *newtype = new_type(TypeMap::hindexed(lengths, displs, *old),
                        envelope(MPI_COMBINER_HINDEXED_BLOCK, {count, blocklength},
                                 std::move(addresses), {oldtype}));
  });
}

int MPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_create_struct", [&] {
    check_count(count);
    require_arrays(count, blocklengths, displacements);
    if (count > 0) require_input(types, "array_of_types");
    std::vector<const TypeMap*> maps;
    for (int i = 0; i < count; ++i) maps.push_back(type_of(types[i], false).get());
    check_lengths(count, blocklengths);
    std::vector<std::int64_t> lengths(blocklengths, blocklengths + count);
    std::vector<std::int64_t> displs(displacements, displacements + count);
    Envelope made_by = envelope(MPI_COMBINER_STRUCT, {count}, {}, {});
    append(made_by.integers, blocklengths, count);
    append(made_by.addresses, displacements, count);
    for (int i = 0; i < count; ++i) made_by.types.push_back(retain_type(types[i]));
    require_output(newtype, "newtype");
    *newtype = new_type(TypeMap::structure(lengths, displs, maps), std::move(made_by));
  });
}

int MPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[],
                             const int starts[], int order, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_create_subarray", [&] {
    const auto& old = type_of(oldtype, false);
    if (ndims < 0) fail(MPI_ERR_COUNT, "negative ndims " + std::to_string(ndims));
    if (ndims == 0) fail(MPI_ERR_ARG, "ndims must be positive");
    require_input(sizes, "array_of_sizes");
    require_input(subsizes, "array_of_subsizes");
    require_input(starts, "array_of_starts");
    if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN) {
      fail(MPI_ERR_ARG, "order must be MPI_ORDER_C or MPI_ORDER_FORTRAN");
    }
    for (int i = 0; i < ndims; ++i) {
      if (sizes[i] <= 0 || subsizes[i] <= 0 || subsizes[i] > sizes[i] || starts[i] < 0 ||
          starts[i] > sizes[i] - subsizes[i]) {
        fail(MPI_ERR_ARG, "dimension " + std::to_string(i) + ": size " +
                              std::to_string(sizes[i]) + ", subsize " +
                              std::to_string(subsizes[i]) + ", start " +
                              std::to_string(starts[i]) + " do not describe a subarray");
      }
    }
    std::vector<int> integers{ndims};
    append(integers, sizes, ndims);
    append(integers, subsizes, ndims);
    append(integers, starts, ndims);
    integers.push_back(order);
    require_output(newtype, "newtype");
    *newtype = new_type(subarray(ndims, sizes, subsizes, starts, order, *old),
                        envelope(MPI_COMBINER_SUBARRAY, std::move(integers), {}, {oldtype}));
  });
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_create_resized", [&] {
    const auto& old = type_of(oldtype, false);
    require_output(newtype, "newtype");
    *newtype = new_type(TypeMap::resized(*old, lb, extent),
                        envelope(MPI_COMBINER_RESIZED, {}, {lb, extent}, {oldtype}));
  });
}

int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_dup", [&] {
    const auto& old = type_of(oldtype, false);
    require_output(newtype, "newtype");
    *newtype = new_type(old, envelope(MPI_COMBINER_DUP, {}, {}, {oldtype}));
    (*newtype)->committed = oldtype->committed.load();
  });
}

int MPI_Type_commit(MPI_Datatype* datatype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_commit", [&] {
    require_output(datatype, "datatype");
    type_of(*datatype, false);
    (*datatype)->committed = true;
  });
}

int MPI_Type_free(MPI_Datatype* datatype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_free", [&] {
    require_output(datatype, "datatype");
    type_of(*datatype, false);
    if ((*datatype)->predefined) fail(MPI_ERR_TYPE, "predefined datatypes cannot be freed");
    // A copy of a handle freed once is still alive while an operation holds it.
    if ((*datatype)->freed_by_user.exchange(true)) {
      fail(MPI_ERR_TYPE, "the datatype was already freed");
    }
    // Pending operations hold their own reference to the layout, and those that hand the
    // handle to a user function hold one to the handle (retain_type).
    release_type(*datatype);
    *datatype = MPI_DATATYPE_NULL;
  });
}

int MPI_Type_size(MPI_Datatype datatype, int* size) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_size", [&] {
    const std::int64_t s = type_of(datatype, false)->size;
    require_output(size, "size");
    *size = s > INT_MAX ? MPI_UNDEFINED : static_cast<int>(s);
  });
}

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_get_extent", [&] {
    const auto& t = type_of(datatype, false);
    require_output(lb, "lb");
    require_output(extent, "extent");
    *lb = static_cast<MPI_Aint>(t->lb);
    *extent = static_cast<MPI_Aint>(t->extent());
  });
}

int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_get_true_extent", [&] {
    const auto& t = type_of(datatype, false);
    require_output(true_lb, "true_lb");
    require_output(true_extent, "true_extent");
    *true_lb = static_cast<MPI_Aint>(t->true_lb);
    *true_extent = static_cast<MPI_Aint>(t->true_ub - t->true_lb);
  });
}

int MPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_get_name", [&] {
    type_of(datatype, false);
    require_output(type_name, "type_name");
    require_output(resultlen, "resultlen");
    std::lock_guard lock(datatype->name_mu);
    std::string name = datatype->name;
    if (name.size() >= MPI_MAX_OBJECT_NAME) name.resize(MPI_MAX_OBJECT_NAME - 1);
    std::memcpy(type_name, name.c_str(), name.size() + 1);
    *resultlen = static_cast<int>(name.size());
  });
}

int MPI_Type_set_name(MPI_Datatype datatype, const char* type_name) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_set_name", [&] {
    type_of(datatype, false);
    if (type_name == nullptr) fail(MPI_ERR_ARG, "null name");
    std::lock_guard lock(datatype->name_mu);
    datatype->name = type_name;
    if (datatype->name.size() >= MPI_MAX_OBJECT_NAME) {
      datatype->name.resize(MPI_MAX_OBJECT_NAME - 1);
    }
  });
}

int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
             int* position, MPI_Comm comm) {
  return guarded(comm, "MPI_Pack", [&] {
    comm_handle(comm);
    const auto& t = type_of(datatype);
    check_count(incount);
    require_output(position, "position");
    const std::int64_t need = data_bytes(incount, *t);
    if (need > 0 && outbuf == nullptr) fail(MPI_ERR_BUFFER, "null output buffer");
    refuse_in_place(outbuf);
    if (outsize < 0) fail(MPI_ERR_ARG, "negative outsize " + std::to_string(outsize));
    if (*position < 0) fail(MPI_ERR_ARG, "negative position " + std::to_string(*position));
    if (*position + need > outsize) {
      fail(MPI_ERR_TRUNCATE, "MPI_Pack needs " + std::to_string(need) + " bytes at position " +
                                 std::to_string(*position) + " of a buffer of " +
                                 std::to_string(outsize));
    }
    const SendBuffer data(inbuf, incount, *t);
    if (need > 0) std::memcpy(at(outbuf, *position), data.ptr, static_cast<std::size_t>(need));
    *position += static_cast<int>(need);
  });
}

int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
               MPI_Datatype datatype, MPI_Comm comm) {
  return guarded(comm, "MPI_Unpack", [&] {
    comm_handle(comm);
    const auto& t = type_of(datatype);
    check_count(outcount);
    require_output(position, "position");
    const std::int64_t need = data_bytes(outcount, *t);
    if (need > 0 && inbuf == nullptr) fail(MPI_ERR_BUFFER, "null input buffer");
    if (missing_buffer(outbuf, outcount, *t)) fail(MPI_ERR_BUFFER, "null output buffer");
    refuse_in_place(inbuf);
    refuse_in_place(outbuf);
    if (*position < 0 || *position + need > insize) {
      fail(MPI_ERR_TRUNCATE, "MPI_Unpack needs " + std::to_string(need) +
                                 " bytes at position " + std::to_string(*position) +
                                 " of a buffer of " + std::to_string(insize));
    }
    t->unpack(at(inbuf, *position), need, outcount, at(outbuf, 0));
    *position += static_cast<int>(need);
  });
}

int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  return guarded(comm, "MPI_Pack_size", [&] {
    comm_handle(comm);
    const auto& t = type_of(datatype);
    check_count(incount);
    require_output(size, "size");
    const std::int64_t n = data_bytes(incount, *t);
    if (n > INT_MAX) fail(MPI_ERR_COUNT, "the packed size exceeds INT_MAX");
    *size = static_cast<int>(n);
  });
}

int MPI_Get_address(const void* location, MPI_Aint* address) {
  return guarded(MPI_COMM_WORLD, "MPI_Get_address", [&] {
    require_output(address, "address");
    *address = static_cast<MPI_Aint>(reinterpret_cast<std::uintptr_t>(location));
  });
}

MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp) {
  return static_cast<MPI_Aint>(static_cast<std::uintptr_t>(base) +
                               static_cast<std::uintptr_t>(disp));
}

MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) {
  return static_cast<MPI_Aint>(static_cast<std::uintptr_t>(addr1) -
                               static_cast<std::uintptr_t>(addr2));
}

}  // extern "C"
