// The MPI-1 attribute calls (MPI 3.1 section 15.2, deprecated since MPI-2.0 but still in the
// standard and in Open MPI): legacy programs and benchmarks use them. Each is its MPI_Comm_*
// counterpart (attr.cpp) under the old name, which its errors carry.

#include "mpi/mpi_impl.hpp"

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval,
                      void* extra_state) {
  return create_keyval("MPI_Keyval_create", copy_fn, delete_fn, keyval, extra_state);
}

int MPI_Keyval_free(int* keyval) { return free_keyval("MPI_Keyval_free", keyval); }

int MPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val) {
  return set_attr("MPI_Attr_put", comm, keyval, attribute_val);
}

int MPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  return get_attr("MPI_Attr_get", comm, keyval, attribute_val, flag);
}

int MPI_Attr_delete(MPI_Comm comm, int keyval) {
  return delete_attr("MPI_Attr_delete", comm, keyval);
}

}  // extern "C"
