/* Reductions: every reduction collective, builtin operations on several types, MINLOC/MAXLOC
 * on pair types, MPI_IN_PLACE, user-defined operations (commutative or not, on a derived struct
 * type), derived types with builtin operations, and MPI_Reduce_local. */
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

#include "mpitest.h"

enum { N = 4 };

/* 2x2 integer matrices multiplied in rank order: associative, not commutative. */
typedef struct {
  long m[4];
} mat2;

static void mat_mul(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const mat2* a = in;
  mat2* b = inout;
  for (int i = 0; i < *len; ++i) {
    const long* x = a[i].m;
    const long* y = b[i].m;
    mat2 r = {{x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3],
               x[2] * y[0] + x[3] * y[2], x[2] * y[1] + x[3] * y[3]}};
    b[i] = r;
  }
}

/* A struct with padding reduced field by field: max of value, sum of weight. */
typedef struct {
  double value;
  char tag;
  int weight;
} sample;

static void sample_op(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const sample* a = in;
  sample* b = inout;
  for (int i = 0; i < *len; ++i) {
    if (a[i].value > b[i].value) b[i].value = a[i].value;
    b[i].weight += a[i].weight;
    b[i].tag = 'S';
  }
}

static mat2 step(int r) {
  mat2 m = {{1, r + 1, 0, 1}};  /* [[1, r+1], [0, 1]]: products add the upper-right entries */
  if (r % 2 == 1) m.m[2] = 1;   /* some non-commuting factors */
  return m;
}

static mat2 product(int from, int to) {  /* step(from) * ... * step(to) */
  mat2 acc = {{1, 0, 0, 1}};
  for (int r = to; r >= from; --r) {
    mat2 s = step(r);
    int one = 1;
    mat_mul(&s, &acc, &one, NULL);
  }
  return acc;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int ranksum = size * (size - 1) / 2;

  /* Allreduce over several types and operations. */
  int iv[N];
  int ir[N];
  for (int i = 0; i < N; ++i) iv[i] = rank + i;
  CHECK_MPI(MPI_Allreduce(iv, ir, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < N; ++i) CHECK(ir[i] == ranksum + size * i);
  CHECK_MPI(MPI_Allreduce(iv, ir, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  CHECK(ir[0] == size - 1 && ir[3] == size + 2);
  CHECK_MPI(MPI_Allreduce(iv, ir, N, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  CHECK(ir[0] == 0 && ir[3] == 3);
  double dv = rank + 1.0;
  double dr = 0;
  CHECK_MPI(MPI_Allreduce(&dv, &dr, 1, MPI_DOUBLE, MPI_PROD, MPI_COMM_WORLD));
  double fact = 1;
  for (int r = 1; r <= size; ++r) fact *= r;
  CHECK(dr == fact);
  unsigned bits = 1u << rank;
  unsigned bor = 0;
  unsigned band = 0;
  unsigned bxor = 0;
  CHECK_MPI(MPI_Allreduce(&bits, &bor, 1, MPI_UNSIGNED, MPI_BOR, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Allreduce(&bits, &band, 1, MPI_UNSIGNED, MPI_BAND, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Allreduce(&bits, &bxor, 1, MPI_UNSIGNED, MPI_BXOR, MPI_COMM_WORLD));
  CHECK(bor == (1u << size) - 1 && band == (size == 1 ? 1u : 0u) && bxor == bor);
  int is_even = rank % 2 == 0;
  int land = 0;
  int lor = 0;
  int lxor = 0;
  CHECK_MPI(MPI_Allreduce(&is_even, &land, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Allreduce(&is_even, &lor, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Allreduce(&is_even, &lxor, 1, MPI_INT, MPI_LXOR, MPI_COMM_WORLD));
  CHECK(land == (size == 1) && lor == 1 && lxor == ((size + 1) / 2) % 2);
  bool flag_in = rank == 0;
  bool flag_out = false;
  CHECK_MPI(MPI_Allreduce(&flag_in, &flag_out, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD));
  CHECK(flag_out);
  int64_t big = (int64_t)1 << 40;
  int64_t big_sum = 0;
  CHECK_MPI(MPI_Allreduce(&big, &big_sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  CHECK(big_sum == big * size);
  double complex z = rank + 1.0 * I;
  double complex zs = 0;
  CHECK_MPI(MPI_Allreduce(&z, &zs, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
  CHECK(creal(zs) == ranksum && cimag(zs) == size);
  unsigned char bytes[2] = {(unsigned char)(1u << rank), 0xF0};
  unsigned char bytes_or[2];
  CHECK_MPI(MPI_Allreduce(bytes, bytes_or, 2, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD));
  CHECK(bytes_or[0] == (1u << size) - 1 && bytes_or[1] == 0xF0);

  /* In place. */
  for (int i = 0; i < N; ++i) ir[i] = rank * i;
  CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, ir, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < N; ++i) CHECK(ir[i] == ranksum * i);

  /* MINLOC / MAXLOC on pair types. */
  struct { double value; int index; } dpair = {(rank % 2 == 0 ? 1.0 : -1.0) * rank, rank};
  struct { double value; int index; } dmin;
  struct { double value; int index; } dmax;
  CHECK_MPI(MPI_Allreduce(&dpair, &dmin, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Allreduce(&dpair, &dmax, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
  const int odd_max = size >= 2 ? ((size - 1) % 2 == 1 ? size - 1 : size - 2) : 0;
  const int even_max = (size - 1) % 2 == 0 ? size - 1 : size - 2;
  CHECK(dmin.index == odd_max && dmin.value == -odd_max);
  CHECK(dmax.index == even_max && dmax.value == even_max);
  struct { int value; int index; } ipairs[2] = {{7, rank}, {rank / 2, rank}};
  struct { int value; int index; } iloc[2];
  CHECK_MPI(MPI_Allreduce(ipairs, iloc, 2, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
  CHECK(iloc[0].value == 7 && iloc[0].index == 0);  /* ties keep the lowest index */
  CHECK(iloc[1].value == 0 && iloc[1].index == 0);
  struct { float value; int index; } fpair = {(float)(rank * 2), rank};
  struct { float value; int index; } floc;
  CHECK_MPI(MPI_Allreduce(&fpair, &floc, 1, MPI_FLOAT_INT, MPI_MAXLOC, MPI_COMM_WORLD));
  CHECK(floc.index == size - 1);
  struct { long value; int index; } lpair = {-rank, rank};
  struct { long value; int index; } lloc;
  CHECK_MPI(MPI_Allreduce(&lpair, &lloc, 1, MPI_LONG_INT, MPI_MINLOC, MPI_COMM_WORLD));
  CHECK(lloc.index == size - 1 && lloc.value == -(size - 1));
  struct { short value; int index; } spair = {(short)(rank % 2), rank};
  struct { short value; int index; } sloc;
  CHECK_MPI(MPI_Allreduce(&spair, &sloc, 1, MPI_SHORT_INT, MPI_MAXLOC, MPI_COMM_WORLD));
  CHECK(sloc.index == (size > 1 ? 1 : 0));

  /* Reduce to every root, also in place. */
  for (int root = 0; root < size; ++root) {
    int out[N] = {-1, -1, -1, -1};
    CHECK_MPI(MPI_Reduce(iv, out, N, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
    if (rank == root) {
      for (int i = 0; i < N; ++i) CHECK(out[i] == ranksum + size * i);
      for (int i = 0; i < N; ++i) out[i] = iv[i];
      CHECK_MPI(MPI_Reduce(MPI_IN_PLACE, out, N, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD));
      CHECK(out[0] == size - 1);
    } else {
      CHECK(out[0] == -1);
      CHECK_MPI(MPI_Reduce(iv, NULL, N, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD));
    }
  }

  /* Reduce_scatter_block and Reduce_scatter. */
  int* vec = malloc(sizeof(int) * (size_t)(2 * size * size + 2));
  int* counts = malloc(sizeof(int) * (size_t)size);
  CHECK(vec && counts);
  for (int i = 0; i < 2 * size; ++i) vec[i] = rank * 1000 + i;
  int block[2] = {-1, -1};
  CHECK_MPI(MPI_Reduce_scatter_block(vec, block, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(block[0] == 1000 * ranksum + size * (2 * rank));
  CHECK(block[1] == 1000 * ranksum + size * (2 * rank + 1));
  CHECK_MPI(MPI_Reduce_scatter_block(MPI_IN_PLACE, vec, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(vec[0] == 1000 * ranksum + size * (2 * rank));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = r + 1;
    total += r + 1;
  }
  for (int i = 0; i < total; ++i) vec[i] = rank + i;
  int offset = rank * (rank + 1) / 2;
  int mine[8];
  CHECK_MPI(MPI_Reduce_scatter(vec, mine, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i <= rank; ++i) CHECK(mine[i] == ranksum + size * (offset + i));
  CHECK_MPI(MPI_Reduce_scatter(MPI_IN_PLACE, vec, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i <= rank; ++i) CHECK(vec[i] == ranksum + size * (offset + i));

  /* Scan and Exscan. */
  int one = rank + 1;
  int scan = 0;
  CHECK_MPI(MPI_Scan(&one, &scan, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(scan == (rank + 1) * (rank + 2) / 2);
  int exscan = -99;
  CHECK_MPI(MPI_Exscan(&one, &exscan, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (rank > 0) CHECK(exscan == rank * (rank + 1) / 2);
  scan = one;
  CHECK_MPI(MPI_Scan(MPI_IN_PLACE, &scan, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  CHECK(scan == rank + 1);
  exscan = one;
  CHECK_MPI(MPI_Exscan(MPI_IN_PLACE, &exscan, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (rank > 0) CHECK(exscan == rank * (rank + 1) / 2);

  /* A non-commutative user operation: results follow rank order. */
  MPI_Datatype mat_type;
  CHECK_MPI(MPI_Type_contiguous(4, MPI_LONG, &mat_type));
  CHECK_MPI(MPI_Type_commit(&mat_type));
  MPI_Op mat_op;
  CHECK_MPI(MPI_Op_create(mat_mul, 0, &mat_op));
  int commute = -1;
  CHECK_MPI(MPI_Op_commutative(mat_op, &commute));
  CHECK(commute == 0);
  CHECK_MPI(MPI_Op_commutative(MPI_SUM, &commute));
  CHECK(commute == 1);
  mat2 m = step(rank);
  mat2 res;
  CHECK_MPI(MPI_Allreduce(&m, &res, 1, mat_type, mat_op, MPI_COMM_WORLD));
  mat2 want = product(0, size - 1);
  for (int i = 0; i < 4; ++i) CHECK(res.m[i] == want.m[i]);
  CHECK_MPI(MPI_Scan(&m, &res, 1, mat_type, mat_op, MPI_COMM_WORLD));
  want = product(0, rank);
  for (int i = 0; i < 4; ++i) CHECK(res.m[i] == want.m[i]);
  if (size > 1) {
    CHECK_MPI(MPI_Exscan(&m, &res, 1, mat_type, mat_op, MPI_COMM_WORLD));
    if (rank > 0) {
      want = product(0, rank - 1);
      for (int i = 0; i < 4; ++i) CHECK(res.m[i] == want.m[i]);
    }
  }
  CHECK_MPI(MPI_Reduce(&m, &res, 1, mat_type, mat_op, 0, MPI_COMM_WORLD));
  if (rank == 0) {
    want = product(0, size - 1);
    for (int i = 0; i < 4; ++i) CHECK(res.m[i] == want.m[i]);
  }

  /* A commutative user operation on a padded struct type (non-contiguous), two elements. */
  MPI_Datatype raw;
  MPI_Datatype sample_type;
  int lens[3] = {1, 1, 1};
  MPI_Aint offs[3] = {offsetof(sample, value), offsetof(sample, tag), offsetof(sample, weight)};
  MPI_Datatype types[3] = {MPI_DOUBLE, MPI_CHAR, MPI_INT};
  CHECK_MPI(MPI_Type_create_struct(3, lens, offs, types, &raw));
  CHECK_MPI(MPI_Type_create_resized(raw, 0, sizeof(sample), &sample_type));
  CHECK_MPI(MPI_Type_commit(&sample_type));
  MPI_Op sample_max;
  CHECK_MPI(MPI_Op_create(sample_op, 1, &sample_max));
  sample s[2] = {{rank * 1.5, 'x', 1}, {-rank * 1.0, 'y', rank}};
  sample sr[2];
  CHECK_MPI(MPI_Allreduce(s, sr, 2, sample_type, sample_max, MPI_COMM_WORLD));
  CHECK(sr[0].value == (size - 1) * 1.5 && sr[0].weight == size);
  CHECK(sr[1].value == 0.0 && sr[1].weight == ranksum);
  CHECK((size == 1 && sr[0].tag == 'x') || (size > 1 && sr[0].tag == 'S'));

#ifdef SEMPI_MPI
  /* Builtin operations on derived types whose elements are all one basic type: allowed by MPI,
   * supported by sempi, rejected by Open MPI (hence only here). */
  /* A strided vector of doubles ... */
  double grid[6] = {rank, -1, rank * 2.0, -1, rank * 3.0, -1};
  double grid_out[6] = {0, 0, 0, 0, 0, 0};
  MPI_Datatype every_other;
  CHECK_MPI(MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &every_other));
  CHECK_MPI(MPI_Type_commit(&every_other));
  CHECK_MPI(MPI_Allreduce(grid, grid_out, 1, every_other, MPI_SUM, MPI_COMM_WORLD));
  CHECK(grid_out[0] == ranksum && grid_out[2] == 2.0 * ranksum && grid_out[4] == 3.0 * ranksum);
  CHECK(grid_out[1] == 0 && grid_out[3] == 0);
  /* ... and a contiguous type of pairs. */
  MPI_Datatype pairs;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_DOUBLE_INT, &pairs));
  CHECK_MPI(MPI_Type_commit(&pairs));
  struct { double value; int index; } dp[2] = {{rank, rank}, {-rank, rank}};
  struct { double value; int index; } dpo[2];
  CHECK_MPI(MPI_Allreduce(dp, dpo, 1, pairs, MPI_MAXLOC, MPI_COMM_WORLD));
  CHECK(dpo[0].index == size - 1 && dpo[1].index == 0 && dpo[1].value == 0);

  CHECK_MPI(MPI_Type_free(&every_other));
  CHECK_MPI(MPI_Type_free(&pairs));
#endif

  /* Reduce_local. */
  int a[3] = {1, 2, 3};
  int b[3] = {10, 20, 30};
  CHECK_MPI(MPI_Reduce_local(a, b, 3, MPI_INT, MPI_SUM));
  CHECK(b[0] == 11 && b[1] == 22 && b[2] == 33);
  mat2 ma = step(0);
  mat2 mb = step(1);
  CHECK_MPI(MPI_Reduce_local(&ma, &mb, 1, mat_type, mat_op));
  want = product(0, 1);
  for (int i = 0; i < 4; ++i) CHECK(mb.m[i] == want.m[i]);

  CHECK_MPI(MPI_Op_free(&mat_op));
  CHECK(mat_op == MPI_OP_NULL);
  CHECK_MPI(MPI_Op_free(&sample_max));
  MPI_Datatype* to_free[] = {&mat_type, &raw, &sample_type};
  for (size_t i = 0; i < sizeof to_free / sizeof to_free[0]; ++i) {
    CHECK_MPI(MPI_Type_free(to_free[i]));
  }
  free(vec);
  free(counts);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
