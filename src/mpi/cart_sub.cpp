// MPI_Cart_sub (MPI 3.1 section 7.5.7): splits a Cartesian communicator into the lower-
// dimensional grids that keep the dimensions marked in remain_dims.

#include <algorithm>

#include "mpi/mpi_impl.hpp"

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  return guarded(comm, "MPI_Cart_sub", [&] {
    auto& h = comm_handle(comm);
    if (!h.cart) fail(MPI_ERR_TOPOLOGY, "the communicator has no Cartesian topology");
    const CartTopology& t = *h.cart;
    if (!t.dims.empty()) require_input(remain_dims, "remain_dims");
    require_output(newcomm, "newcomm");
    // Ranks are laid out row-major over the grid (as MPI_Cart_create does): walk this rank's
    // coordinates from the last dimension, numbering the dropped dimensions (which sub-grid:
    // the split colour) and the kept ones (the rank within it: the key) separately.
    int rest = h.comm.rank();
    int color = 0;
    int color_scale = 1;
    int key = 0;
    int key_scale = 1;
    auto sub = std::make_shared<CartTopology>();
    for (std::size_t i = t.dims.size(); i-- > 0;) {
      const int coord = rest % t.dims[i];
      rest /= t.dims[i];
      if (remain_dims[i] != 0) {
        key += coord * key_scale;
        key_scale *= t.dims[i];
        sub->dims.push_back(t.dims[i]);  // last dimension first: reversed below
        sub->periods.push_back(t.periods[i]);
      } else {
        color += coord * color_scale;
        color_scale *= t.dims[i];
      }
    }
    std::reverse(sub->dims.begin(), sub->dims.end());
    std::reverse(sub->periods.begin(), sub->periods.end());
    *newcomm = new_comm_handle(h.comm.split(color, key), h.errhandler->load());
    if (*newcomm != MPI_COMM_NULL) (*newcomm)->cart = std::move(sub);
  });
}

}  // extern "C"
