/* MPI_Type_get_envelope / MPI_Type_get_contents (MPI 3.1 section 4.1.13): each constructor's
 * combiner and arguments come back as they were given; derived argument types come back as new
 * handles of the same layout (and decode in turn), predefined ones as themselves. A predefined
 * type is MPI_COMBINER_NAMED and has no contents. */
#include "mpitest.h"

enum { kMax = 16 };

/* What MPI_Type_get_contents returned for one type. */
struct contents {
  int combiner;
  int ni, na, nd;
  int integers[kMax];
  MPI_Aint addresses[kMax];
  MPI_Datatype types[kMax];
};

static struct contents decode(MPI_Datatype type) {
  struct contents c;
  CHECK_MPI(MPI_Type_get_envelope(type, &c.ni, &c.na, &c.nd, &c.combiner));
  CHECK(c.ni <= kMax && c.na <= kMax && c.nd <= kMax);
  /* Exactly the envelope's sizes, as programs usually pass them (Open MPI 4.1 reads past
   * max_datatypes entries it did not fill when given more). */
  CHECK_MPI(MPI_Type_get_contents(type, c.ni, c.na, c.nd, c.integers, c.addresses, c.types));
  return c;
}

static void expect_ints(const struct contents* c, int n, const int* expected) {
  CHECK(c->ni == n);
  for (int i = 0; i < n; ++i) CHECK(c->integers[i] == expected[i]);
}

static void named(void) {
  int ni = -1;
  int na = -1;
  int nd = -1;
  int combiner = -1;
  CHECK_MPI(MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &combiner));
  CHECK(combiner == MPI_COMBINER_NAMED && ni == 0 && na == 0 && nd == 0);
  CHECK_MPI(MPI_Type_get_envelope(MPI_DOUBLE_INT, &ni, &na, &nd, &combiner));
  CHECK(combiner == MPI_COMBINER_NAMED);
  int integers[1];
  MPI_Aint addresses[1];
  MPI_Datatype types[1];
  /* Erroneous (the standard names no class): MPI_ERR_TYPE in sempi and MPICH, MPI_ERR_INTERN
   * in Open MPI 4.1. */
#ifdef SEMPI_MPI
  EXPECT_ERROR_CLASS(MPI_ERR_TYPE,
                     MPI_Type_get_contents(MPI_INT, 1, 1, 1, integers, addresses, types));
#else
  CHECK(MPI_Type_get_contents(MPI_INT, 1, 1, 1, integers, addresses, types) != MPI_SUCCESS);
#endif
}

static void vectors(void) {
  MPI_Datatype contiguous, vector, hvector;
  CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &contiguous));
  CHECK_MPI(MPI_Type_vector(2, 1, 3, MPI_DOUBLE, &vector));
  CHECK_MPI(MPI_Type_create_hvector(4, 2, 40, MPI_SHORT, &hvector));

  struct contents c = decode(contiguous);
  const int contiguous_args[] = {3};
  CHECK(c.combiner == MPI_COMBINER_CONTIGUOUS && c.na == 0 && c.nd == 1);
  expect_ints(&c, 1, contiguous_args);
  CHECK(c.types[0] == MPI_INT); /* predefined: the same handle, nothing to free */

  c = decode(vector);
  const int vector_args[] = {2, 1, 3};
  CHECK(c.combiner == MPI_COMBINER_VECTOR && c.na == 0 && c.nd == 1);
  expect_ints(&c, 3, vector_args);
  CHECK(c.types[0] == MPI_DOUBLE);

  c = decode(hvector);
  const int hvector_args[] = {4, 2};
  CHECK(c.combiner == MPI_COMBINER_HVECTOR && c.na == 1 && c.nd == 1);
  expect_ints(&c, 2, hvector_args);
  CHECK(c.addresses[0] == 40 && c.types[0] == MPI_SHORT);

  /* Arrays smaller than the envelope says are an error, not an overflow: MPI_ERR_ARG in sempi
   * and MPICH, MPI_ERR_INTERN in Open MPI 4.1. */
  int two[2];
  MPI_Datatype type[1];
#ifdef SEMPI_MPI
  EXPECT_ARG(MPI_Type_get_contents(vector, 2, 0, 1, two, NULL, type));
  EXPECT_ARG(MPI_Type_get_contents(vector, 3, 0, 0, two, NULL, type));
#else
  CHECK(MPI_Type_get_contents(vector, 2, 0, 1, two, NULL, type) != MPI_SUCCESS);
  CHECK(MPI_Type_get_contents(vector, 3, 0, 0, two, NULL, type) != MPI_SUCCESS);
#endif

  CHECK_MPI(MPI_Type_free(&contiguous));
  CHECK_MPI(MPI_Type_free(&vector));
  CHECK_MPI(MPI_Type_free(&hvector));
}

static void indexed(void) {
  const int lengths[] = {2, 1, 3};
  const int displacements[] = {0, 5, 9};
  const MPI_Aint byte_displacements[] = {0, 16, 64};
  MPI_Datatype indexed, hindexed, block, hblock;
  CHECK_MPI(MPI_Type_indexed(3, lengths, displacements, MPI_INT, &indexed));
  CHECK_MPI(MPI_Type_create_hindexed(3, lengths, byte_displacements, MPI_FLOAT, &hindexed));
  CHECK_MPI(MPI_Type_create_indexed_block(3, 2, displacements, MPI_CHAR, &block));
  CHECK_MPI(MPI_Type_create_hindexed_block(3, 4, byte_displacements, MPI_BYTE, &hblock));

  struct contents c = decode(indexed);
  const int indexed_args[] = {3, 2, 1, 3, 0, 5, 9};
  CHECK(c.combiner == MPI_COMBINER_INDEXED && c.na == 0 && c.nd == 1 && c.types[0] == MPI_INT);
  expect_ints(&c, 7, indexed_args);

  c = decode(hindexed);
  const int hindexed_args[] = {3, 2, 1, 3};
  CHECK(c.combiner == MPI_COMBINER_HINDEXED && c.na == 3 && c.nd == 1);
  expect_ints(&c, 4, hindexed_args);
  for (int i = 0; i < 3; ++i) CHECK(c.addresses[i] == byte_displacements[i]);
  CHECK(c.types[0] == MPI_FLOAT);

  c = decode(block);
  const int block_args[] = {3, 2, 0, 5, 9};
  CHECK(c.combiner == MPI_COMBINER_INDEXED_BLOCK && c.na == 0 && c.types[0] == MPI_CHAR);
  expect_ints(&c, 5, block_args);

  c = decode(hblock);
  const int hblock_args[] = {3, 4};
  CHECK(c.combiner == MPI_COMBINER_HINDEXED_BLOCK && c.na == 3 && c.types[0] == MPI_BYTE);
  expect_ints(&c, 2, hblock_args);
  for (int i = 0; i < 3; ++i) CHECK(c.addresses[i] == byte_displacements[i]);

  CHECK_MPI(MPI_Type_free(&indexed));
  CHECK_MPI(MPI_Type_free(&hindexed));
  CHECK_MPI(MPI_Type_free(&block));
  CHECK_MPI(MPI_Type_free(&hblock));
}

/* A struct of a predefined and a derived member, then a dup and a resize of it: the derived
 * member comes back as a new handle that decodes to the original vector. */
static void nested(void) {
  MPI_Datatype pair, record, dup, resized;
  CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &pair));
  const int lengths[] = {1, 3};
  const MPI_Aint displacements[] = {0, 8};
  const MPI_Datatype types[] = {MPI_DOUBLE, pair};
  CHECK_MPI(MPI_Type_create_struct(2, lengths, displacements, types, &record));
  /* The record keeps what it was made of even once the program frees it. */
  CHECK_MPI(MPI_Type_free(&pair));
  CHECK_MPI(MPI_Type_dup(record, &dup));
  CHECK_MPI(MPI_Type_create_resized(record, -4, 100, &resized));

  struct contents c = decode(record);
  const int record_args[] = {2, 1, 3};
  CHECK(c.combiner == MPI_COMBINER_STRUCT && c.na == 2 && c.nd == 2);
  expect_ints(&c, 3, record_args);
  CHECK(c.addresses[0] == 0 && c.addresses[1] == 8);
  CHECK(c.types[0] == MPI_DOUBLE);
  MPI_Datatype member = c.types[1];
  struct contents m = decode(member);
  const int pair_args[] = {2, 1, 2};
  CHECK(m.combiner == MPI_COMBINER_VECTOR && m.types[0] == MPI_INT);
  expect_ints(&m, 3, pair_args);
  MPI_Aint lb = -1;
  MPI_Aint extent = -1;
  CHECK_MPI(MPI_Type_get_extent(member, &lb, &extent));
  CHECK(lb == 0 && extent == 3 * (MPI_Aint)sizeof(int));
  CHECK_MPI(MPI_Type_free(&member));

  c = decode(dup);
  CHECK(c.combiner == MPI_COMBINER_DUP && c.ni == 0 && c.na == 0 && c.nd == 1);
  struct contents again = decode(c.types[0]);
  CHECK(again.combiner == MPI_COMBINER_STRUCT);
  CHECK_MPI(MPI_Type_free(&again.types[1]));
  CHECK_MPI(MPI_Type_free(&c.types[0]));

  c = decode(resized);
  CHECK(c.combiner == MPI_COMBINER_RESIZED && c.ni == 0 && c.na == 2 && c.nd == 1);
  CHECK(c.addresses[0] == -4 && c.addresses[1] == 100);
  CHECK_MPI(MPI_Type_free(&c.types[0]));

  CHECK_MPI(MPI_Type_free(&record));
  CHECK_MPI(MPI_Type_free(&dup));
  CHECK_MPI(MPI_Type_free(&resized));
}

static void subarray(void) {
  const int sizes[] = {6, 8};
  const int subsizes[] = {2, 3};
  const int starts[] = {1, 4};
  MPI_Datatype tile;
  CHECK_MPI(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_INT,
                                     &tile));
  struct contents c = decode(tile);
  const int tile_args[] = {2, 6, 8, 2, 3, 1, 4, MPI_ORDER_FORTRAN};
  CHECK(c.combiner == MPI_COMBINER_SUBARRAY && c.na == 0 && c.nd == 1 && c.types[0] == MPI_INT);
  expect_ints(&c, 8, tile_args);
  CHECK_MPI(MPI_Type_free(&tile));
}

/* A decoded type is a usable type: send with the struct's vector member. */
static void decoded_types_communicate(int rank) {
  MPI_Datatype pair, record;
  CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &pair));
  CHECK_MPI(MPI_Type_commit(&pair));
  const int lengths[] = {1};
  const MPI_Aint displacements[] = {0};
  CHECK_MPI(MPI_Type_create_struct(1, lengths, displacements, &pair, &record));
  struct contents c = decode(record);
  MPI_Datatype member = c.types[0];
  CHECK_MPI(MPI_Type_commit(&member));
  int out[3] = {rank, -1, rank + 10};
  int in[3] = {-1, -1, -1};
  CHECK_MPI(MPI_Sendrecv(out, 1, member, 0, 1, in, 1, member, 0, 1, MPI_COMM_SELF,
                         MPI_STATUS_IGNORE));
  CHECK(in[0] == rank && in[1] == -1 && in[2] == rank + 10);
  CHECK_MPI(MPI_Type_free(&member));
  CHECK_MPI(MPI_Type_free(&record));
  CHECK_MPI(MPI_Type_free(&pair));
}

int main(int argc, char** argv) {
  int rank;
  int size;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

  named();
  vectors();
  indexed();
  nested();
  subarray();
  decoded_types_communicate(rank);

  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
