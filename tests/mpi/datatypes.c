/* Derived datatypes: constructors, extents, names, pack/unpack, addresses, MPI_Get_elements and
 * point-to-point transfers of non-contiguous data (including MPI_BOTTOM with absolute
 * addresses). */
#include <stddef.h>
#include <string.h>

#include "mpitest.h"

struct particle {
  double position[3];
  int id;
  char kind;
};

static void check_extent(MPI_Datatype t, MPI_Aint lb, MPI_Aint extent, int size) {
  MPI_Aint got_lb = -1;
  MPI_Aint got_extent = -1;
  int got_size = -1;
  CHECK_MPI(MPI_Type_get_extent(t, &got_lb, &got_extent));
  CHECK_MPI(MPI_Type_size(t, &got_size));
  CHECK(got_lb == lb && got_extent == extent && got_size == size);
}

static void check_true_extent(MPI_Datatype t, MPI_Aint true_lb, MPI_Aint true_extent) {
  MPI_Aint got_lb = -1;
  MPI_Aint got_extent = -1;
  CHECK_MPI(MPI_Type_get_true_extent(t, &got_lb, &got_extent));
  CHECK(got_lb == true_lb && got_extent == true_extent);
}

/* An int with markers at 4 and 12, then a char at 16 beyond the upper marker. */
static void check_marker_bounds(void) {
  MPI_Datatype marked_int;
  CHECK_MPI(MPI_Type_create_resized(MPI_INT, 4, 8, &marked_int));
  int lengths[2] = {1, 1};
  MPI_Aint displs[2] = {0, 16};
  MPI_Datatype members[2] = {marked_int, MPI_CHAR};
  MPI_Datatype marked;
  CHECK_MPI(MPI_Type_create_struct(2, lengths, displs, members, &marked));
  check_extent(marked, 4, 8, (int)sizeof(int) + 1);
  check_true_extent(marked, 0, 17);
  /* Two of them: markers at 4, 12 and 12, 20; data up to 8 + 17. */
  MPI_Datatype pair;
  CHECK_MPI(MPI_Type_contiguous(2, marked, &pair));
  check_extent(pair, 4, 16, 2 * ((int)sizeof(int) + 1));
  check_true_extent(pair, 0, 25);
  /* A struct of that pair and an unmarked double: the double does not move the bounds. */
  MPI_Aint pair_displs[2] = {0, 3};
  MPI_Datatype pair_members[2] = {pair, MPI_DOUBLE};
  MPI_Datatype outer;
  CHECK_MPI(MPI_Type_create_struct(2, lengths, pair_displs, pair_members, &outer));
  check_extent(outer, 4, 16, 2 * ((int)sizeof(int) + 1) + (int)sizeof(double));
  MPI_Datatype outer_dup;
  CHECK_MPI(MPI_Type_dup(outer, &outer_dup));
  check_extent(outer_dup, 4, 16, 2 * ((int)sizeof(int) + 1) + (int)sizeof(double));
  MPI_Datatype* made[] = {&marked_int, &marked, &pair, &outer, &outer_dup};
  for (size_t i = 0; i < sizeof made / sizeof made[0]; ++i) CHECK_MPI(MPI_Type_free(made[i]));
}

/* A packed C struct (extent 9, not a multiple of double's alignment) described by a resized
 * struct, nested in another struct: the outer type keeps extent 9, so arrays of it line up. */
#pragma pack(push, 1)
struct packed_item {
  double value;
  char tag;
};
struct packed_outer {
  struct packed_item item;
};
#pragma pack(pop)

static void check_packed_struct(int rank, int left, int right) {
  int lengths[2] = {1, 1};
  MPI_Aint displs[2] = {offsetof(struct packed_item, value), offsetof(struct packed_item, tag)};
  MPI_Datatype members[2] = {MPI_DOUBLE, MPI_CHAR};
  MPI_Datatype raw;
  MPI_Datatype item;
  MPI_Datatype outer;
  CHECK_MPI(MPI_Type_create_struct(2, lengths, displs, members, &raw));
  CHECK_MPI(MPI_Type_create_resized(raw, 0, sizeof(struct packed_item), &item));
  MPI_Aint outer_displ = offsetof(struct packed_outer, item);
  CHECK_MPI(MPI_Type_create_struct(1, lengths, &outer_displ, &item, &outer));
  CHECK_MPI(MPI_Type_commit(&outer));
  check_extent(outer, 0, sizeof(struct packed_outer), (int)sizeof(double) + 1);
  struct packed_outer out[3];
  struct packed_outer in[3];
  for (int i = 0; i < 3; ++i) {
    out[i].item.value = rank + 0.5 * i;
    out[i].item.tag = (char)('a' + i);
  }
  memset(in, 0, sizeof in);
  CHECK_MPI(MPI_Sendrecv(out, 3, outer, right, 20, in, 3, outer, left, 20, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
  for (int i = 0; i < 3; ++i) {
    CHECK(in[i].item.value == left + 0.5 * i && in[i].item.tag == 'a' + i);
  }
  MPI_Datatype* made[] = {&raw, &item, &outer};
  for (size_t i = 0; i < sizeof made / sizeof made[0]; ++i) CHECK_MPI(MPI_Type_free(made[i]));
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  MPI_Status status;
  int count = -1;

  /* Basic types. */
  check_extent(MPI_INT, 0, sizeof(int), sizeof(int));
  check_extent(MPI_DOUBLE, 0, sizeof(double), sizeof(double));
  check_extent(MPI_CHAR, 0, 1, 1);
  check_extent(MPI_INT64_T, 0, 8, 8);
  check_extent(MPI_C_DOUBLE_COMPLEX, 0, 2 * sizeof(double), 2 * sizeof(double));
  check_extent(MPI_2INT, 0, 2 * sizeof(int), 2 * sizeof(int));
  {
    struct { double v; int i; } di;
    (void)di;
    MPI_Aint lb = -1;
    MPI_Aint extent = -1;
    CHECK_MPI(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &extent));
    CHECK(lb == 0 && extent == (MPI_Aint)sizeof di);
  }

  /* Contiguous. */
  MPI_Datatype contig;
  CHECK_MPI(MPI_Type_contiguous(5, MPI_INT, &contig));
  CHECK_MPI(MPI_Type_commit(&contig));
  check_extent(contig, 0, 5 * sizeof(int), 5 * sizeof(int));

  /* Vector: every third int, 4 blocks of 2. */
  MPI_Datatype vec;
  CHECK_MPI(MPI_Type_vector(4, 2, 3, MPI_INT, &vec));
  CHECK_MPI(MPI_Type_commit(&vec));
  check_extent(vec, 0, (3 * 3 + 2) * sizeof(int), 8 * sizeof(int));
  MPI_Aint true_lb = -1;
  MPI_Aint true_extent = -1;
  CHECK_MPI(MPI_Type_get_true_extent(vec, &true_lb, &true_extent));
  CHECK(true_lb == 0 && true_extent == (3 * 3 + 2) * (MPI_Aint)sizeof(int));

  int src[12];
  int dst[12];
  for (int i = 0; i < 12; ++i) src[i] = rank * 100 + i;
  for (int i = 0; i < 12; ++i) dst[i] = -1;
  CHECK_MPI(MPI_Sendrecv(src, 1, vec, right, 1, dst, 1, vec, left, 1, MPI_COMM_WORLD, &status));
  for (int i = 0; i < 12; ++i) {
    const int in_vector = i < 11 && i % 3 != 2;
    CHECK(dst[i] == (in_vector ? left * 100 + i : -1));
  }
  CHECK_MPI(MPI_Get_count(&status, vec, &count));
  CHECK(count == 1);
  CHECK_MPI(MPI_Get_elements(&status, vec, &count));
  CHECK(count == 8);
  /* A vector received as plain ints, and plain ints received as a vector. */
  int plain[8];
  CHECK_MPI(MPI_Sendrecv(src, 1, vec, right, 2, plain, 8, MPI_INT, left, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
  CHECK(plain[0] == left * 100 + 0 && plain[1] == left * 100 + 1 && plain[2] == left * 100 + 3);
  CHECK(plain[7] == left * 100 + 10);
  /* Partial receive: 3 ints into a vector type: 1 whole element is not there. */
  for (int i = 0; i < 12; ++i) dst[i] = -1;
  CHECK_MPI(MPI_Sendrecv(src, 3, MPI_INT, right, 3, dst, 1, vec, left, 3, MPI_COMM_WORLD,
                         &status));
  CHECK_MPI(MPI_Get_count(&status, vec, &count));
  CHECK(count == MPI_UNDEFINED);
  CHECK_MPI(MPI_Get_elements(&status, vec, &count));
  CHECK(count == 3);
  CHECK(dst[0] == left * 100 && dst[1] == left * 100 + 1 && dst[3] == left * 100 + 2);
  CHECK(dst[4] == -1);

  /* Hvector with a byte stride, and a vector of vectors (nested, non-contiguous). */
  MPI_Datatype hvec;
  CHECK_MPI(MPI_Type_create_hvector(3, 1, 2 * sizeof(double), MPI_DOUBLE, &hvec));
  CHECK_MPI(MPI_Type_commit(&hvec));
  check_extent(hvec, 0, 5 * sizeof(double), 3 * sizeof(double));
  double dsrc[6] = {rank + 0.5, -1, rank + 1.5, -1, rank + 2.5, -1};
  double ddst[6] = {0, 0, 0, 0, 0, 0};
  CHECK_MPI(MPI_Sendrecv(dsrc, 1, hvec, right, 4, ddst, 3, MPI_DOUBLE, left, 4, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
  CHECK(ddst[0] == left + 0.5 && ddst[1] == left + 1.5 && ddst[2] == left + 2.5);

  /* Indexed, hindexed, indexed_block. */
  int lengths[3] = {2, 1, 3};
  int displs[3] = {0, 4, 7};
  MPI_Datatype idx;
  CHECK_MPI(MPI_Type_indexed(3, lengths, displs, MPI_INT, &idx));
  CHECK_MPI(MPI_Type_commit(&idx));
  check_extent(idx, 0, 10 * sizeof(int), 6 * sizeof(int));
  MPI_Aint hdispls[3] = {0, 4 * sizeof(int), 7 * sizeof(int)};
  MPI_Datatype hidx;
  CHECK_MPI(MPI_Type_create_hindexed(3, lengths, hdispls, MPI_INT, &hidx));
  CHECK_MPI(MPI_Type_commit(&hidx));
  check_extent(hidx, 0, 10 * sizeof(int), 6 * sizeof(int));
  int bdispls[3] = {1, 5, 9};
  MPI_Datatype iblock;
  CHECK_MPI(MPI_Type_create_indexed_block(3, 2, bdispls, MPI_INT, &iblock));
  CHECK_MPI(MPI_Type_commit(&iblock));
  check_extent(iblock, sizeof(int), 10 * sizeof(int), 6 * sizeof(int));
  for (int i = 0; i < 12; ++i) dst[i] = -1;
  CHECK_MPI(MPI_Sendrecv(src, 1, idx, right, 5, dst, 1, hidx, left, 5, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
  const int idx_expect[12] = {0, 1, -1, -1, 4, -1, -1, 7, 8, 9, -1, -1};
  for (int i = 0; i < 12; ++i) {
    CHECK(dst[i] == (idx_expect[i] < 0 ? -1 : left * 100 + idx_expect[i]));
  }
  for (int i = 0; i < 12; ++i) dst[i] = -1;
  CHECK_MPI(MPI_Sendrecv(src, 1, iblock, right, 6, dst, 6, MPI_INT, left, 6, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
  const int block_expect[6] = {1, 2, 5, 6, 9, 10};
  for (int i = 0; i < 6; ++i) CHECK(dst[i] == left * 100 + block_expect[i]);

  /* Struct describing a C struct, resized to its real extent, and arrays of it. */
  struct particle parts[4];
  struct particle got[4];
  int blocklens[3] = {3, 1, 1};
  MPI_Aint base;
  MPI_Aint fields[3];
  CHECK_MPI(MPI_Get_address(&parts[0], &base));
  CHECK_MPI(MPI_Get_address(&parts[0].position, &fields[0]));
  CHECK_MPI(MPI_Get_address(&parts[0].id, &fields[1]));
  CHECK_MPI(MPI_Get_address(&parts[0].kind, &fields[2]));
  for (int i = 0; i < 3; ++i) fields[i] = MPI_Aint_diff(fields[i], base);
  CHECK(fields[1] == (MPI_Aint)offsetof(struct particle, id));
  MPI_Datatype types[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR};
  MPI_Datatype raw_particle;
  MPI_Datatype particle_type;
  CHECK_MPI(MPI_Type_create_struct(3, blocklens, fields, types, &raw_particle));
  CHECK_MPI(MPI_Type_create_resized(raw_particle, 0, sizeof(struct particle), &particle_type));
  CHECK_MPI(MPI_Type_commit(&particle_type));
  CHECK_MPI(MPI_Type_free(&raw_particle));
  check_extent(particle_type, 0, sizeof(struct particle), 3 * sizeof(double) + sizeof(int) + 1);
  for (int i = 0; i < 4; ++i) {
    for (int d = 0; d < 3; ++d) parts[i].position[d] = rank + i + d * 0.25;
    parts[i].id = rank * 10 + i;
    parts[i].kind = (char)('A' + i);
  }
  memset(got, 0, sizeof got);
  CHECK_MPI(MPI_Sendrecv(parts, 4, particle_type, right, 7, got, 4, particle_type, left, 7,
                         MPI_COMM_WORLD, &status));
  for (int i = 0; i < 4; ++i) {
    CHECK(got[i].position[2] == left + i + 0.5 && got[i].id == left * 10 + i);
    CHECK(got[i].kind == 'A' + i);
  }
  CHECK_MPI(MPI_Get_elements(&status, particle_type, &count));
  CHECK(count == 4 * 5);

  /* The same particle sent from MPI_BOTTOM with absolute addresses. */
  MPI_Aint absolute[3];
  CHECK_MPI(MPI_Get_address(parts[1].position, &absolute[0]));
  CHECK_MPI(MPI_Get_address(&parts[1].id, &absolute[1]));
  CHECK_MPI(MPI_Get_address(&parts[1].kind, &absolute[2]));
  MPI_Datatype bottom_type;
  CHECK_MPI(MPI_Type_create_struct(3, blocklens, absolute, types, &bottom_type));
  CHECK_MPI(MPI_Type_commit(&bottom_type));
  memset(got, 0, sizeof got);
  CHECK_MPI(MPI_Sendrecv(MPI_BOTTOM, 1, bottom_type, right, 8, got, 1, particle_type, left, 8,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  CHECK(got[0].id == left * 10 + 1 && got[0].kind == 'B');
  CHECK(MPI_Aint_add(base, fields[1]) == absolute[1] - (MPI_Aint)sizeof(struct particle));
  CHECK_MPI(MPI_Type_free(&bottom_type));

  /* Explicit bounds are sticky (MPI 3.1 sections 4.1.6-4.1.7): a struct whose member carries
   * lb/ub markers from MPI_Type_create_resized takes its bounds from the markers alone, with
   * no alignment padding, and so do types built from it. */
  check_marker_bounds();
  check_packed_struct(rank, left, right);

  /* Subarray: the 2x3 block at (1,2) of a 4x6 C array, and its Fortran-order twin. */
  int sizes[2] = {4, 6};
  int subsizes[2] = {2, 3};
  int starts[2] = {1, 2};
  MPI_Datatype sub;
  CHECK_MPI(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &sub));
  CHECK_MPI(MPI_Type_commit(&sub));
  check_extent(sub, 0, 24 * sizeof(int), 6 * sizeof(int));
  int grid[24];
  int block[6];
  for (int i = 0; i < 24; ++i) grid[i] = rank * 1000 + i;
  CHECK_MPI(MPI_Sendrecv(grid, 1, sub, right, 9, block, 6, MPI_INT, left, 9, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
  const int sub_expect[6] = {8, 9, 10, 14, 15, 16};
  for (int i = 0; i < 6; ++i) CHECK(block[i] == left * 1000 + sub_expect[i]);
  int fsizes[2] = {6, 4};
  int fsubsizes[2] = {3, 2};
  int fstarts[2] = {2, 1};
  MPI_Datatype fsub;
  CHECK_MPI(MPI_Type_create_subarray(2, fsizes, fsubsizes, fstarts, MPI_ORDER_FORTRAN, MPI_INT,
                                     &fsub));
  CHECK_MPI(MPI_Type_commit(&fsub));
  CHECK_MPI(MPI_Sendrecv(grid, 1, fsub, right, 10, block, 6, MPI_INT, left, 10, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
  for (int i = 0; i < 6; ++i) CHECK(block[i] == left * 1000 + sub_expect[i]);

  /* Dup keeps the layout; names. */
  MPI_Datatype vec_dup;
  CHECK_MPI(MPI_Type_dup(vec, &vec_dup));
  check_extent(vec_dup, 0, (3 * 3 + 2) * sizeof(int), 8 * sizeof(int));
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  CHECK_MPI(MPI_Type_get_name(MPI_INT, name, &len));
  CHECK(strcmp(name, "MPI_INT") == 0 && len == 7);
  CHECK_MPI(MPI_Type_set_name(vec_dup, "every third pair"));
  CHECK_MPI(MPI_Type_get_name(vec_dup, name, &len));
  CHECK(strcmp(name, "every third pair") == 0 && len == 16);
  for (int i = 0; i < 12; ++i) dst[i] = -1;
  CHECK_MPI(MPI_Sendrecv(src, 1, vec_dup, right, 11, dst, 1, vec, left, 11, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
  CHECK(dst[10] == left * 100 + 10 && dst[2] == -1);

  /* Pack / Unpack: an int, a vector and a particle into one buffer. */
  int pack_size = 0;
  int total = 0;
  CHECK_MPI(MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &pack_size));
  total += pack_size;
  CHECK_MPI(MPI_Pack_size(1, vec, MPI_COMM_WORLD, &pack_size));
  CHECK(pack_size >= 8 * (int)sizeof(int));
  total += pack_size;
  CHECK_MPI(MPI_Pack_size(1, particle_type, MPI_COMM_WORLD, &pack_size));
  total += pack_size;
  char* packed = malloc((size_t)total);
  CHECK(packed != NULL);
  int position = 0;
  const int header = 4242 + rank;
  CHECK_MPI(MPI_Pack(&header, 1, MPI_INT, packed, total, &position, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Pack(src, 1, vec, packed, total, &position, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Pack(&parts[3], 1, particle_type, packed, total, &position, MPI_COMM_WORLD));
  const int packed_bytes = position;
  char* incoming = malloc((size_t)total);
  CHECK(incoming != NULL);
  CHECK_MPI(MPI_Sendrecv(packed, packed_bytes, MPI_PACKED, right, 12, incoming, total, MPI_PACKED,
                         left, 12, MPI_COMM_WORLD, &status));
  CHECK_MPI(MPI_Get_count(&status, MPI_PACKED, &count));
  CHECK(count == packed_bytes);
  position = 0;
  int header_in = 0;
  for (int i = 0; i < 12; ++i) dst[i] = -1;
  struct particle one;
  memset(&one, 0, sizeof one);
  CHECK_MPI(MPI_Unpack(incoming, count, &position, &header_in, 1, MPI_INT, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Unpack(incoming, count, &position, dst, 1, vec, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Unpack(incoming, count, &position, &one, 1, particle_type, MPI_COMM_WORLD));
  CHECK(position == packed_bytes);
  CHECK(header_in == 4242 + left && dst[9] == left * 100 + 9 && dst[8] == -1);
  CHECK(one.id == left * 10 + 3 && one.kind == 'D');
  free(packed);
  free(incoming);

  /* Nonblocking transfers of a non-contiguous type. */
  MPI_Request reqs[2];
  for (int i = 0; i < 12; ++i) dst[i] = -1;
  CHECK_MPI(MPI_Irecv(dst, 1, vec, left, 13, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Isend(src, 1, vec, right, 13, MPI_COMM_WORLD, &reqs[1]));
  CHECK_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
  CHECK(dst[0] == left * 100 && dst[10] == left * 100 + 10 && dst[11] == -1);

  MPI_Datatype* all[] = {&contig, &vec, &hvec, &idx, &hidx, &iblock, &particle_type, &sub,
                         &fsub, &vec_dup};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    CHECK_MPI(MPI_Type_free(all[i]));
    CHECK(*all[i] == MPI_DATATYPE_NULL);
  }
  CHECK_MPI(MPI_Finalize());
  return 0;
}
