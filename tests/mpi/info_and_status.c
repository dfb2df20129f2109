/* MPI_Info_dup, MPI_Info_get_nthkey, MPI_Info_get_valuelen (with MPI_Info_get_nkeys), and the
 * status setters MPI_Status_set_elements(_x) and MPI_Status_set_cancelled: MPI_Get_count,
 * MPI_Get_elements and MPI_Test_cancelled then report what was set. Calls that return one
 * status leave its MPI_ERROR field alone. */
#include <stddef.h>
#include <string.h>

#include "mpitest.h"

static const char* const kKeys[3] = {"zeta", "alpha", "mid"};
static const char* const kValues[3] = {"last letter", "1", "somewhere in between"};

/* `info` holds exactly kKeys -> kValues: each key once among the numbered keys, with the
 * right value length and value. */
static void check_info(MPI_Info info) {
  int nkeys = -1;
  CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
  CHECK(nkeys == 3);
  int seen[3] = {0, 0, 0};
  for (int n = 0; n < nkeys; ++n) {
    char key[MPI_MAX_INFO_KEY + 1];
    CHECK_MPI(MPI_Info_get_nthkey(info, n, key));
    for (int k = 0; k < 3; ++k) {
      if (strcmp(key, kKeys[k]) != 0) continue;
      ++seen[k];
      int len = -1;
      int flag = 0;
      CHECK_MPI(MPI_Info_get_valuelen(info, key, &len, &flag));
      CHECK(flag == 1 && len == (int)strlen(kValues[k]));
      char value[64];
      CHECK_MPI(MPI_Info_get(info, key, len, value, &flag));
      CHECK(flag == 1 && strcmp(value, kValues[k]) == 0);
    }
  }
  for (int k = 0; k < 3; ++k) CHECK(seen[k] == 1);
}

static void info(void) {
  MPI_Info original;
  CHECK_MPI(MPI_Info_create(&original));
  for (int k = 0; k < 3; ++k) CHECK_MPI(MPI_Info_set(original, kKeys[k], kValues[k]));
  check_info(original);
  int len = 42;
  int flag = 1;
  CHECK_MPI(MPI_Info_get_valuelen(original, "missing", &len, &flag));
  CHECK(flag == 0);

  /* The copy holds the same entries and is independent of the original. */
  MPI_Info copy;
  CHECK_MPI(MPI_Info_dup(original, &copy));
  CHECK(copy != original);
  check_info(copy);
  CHECK_MPI(MPI_Info_set(copy, "extra", "x"));
  CHECK_MPI(MPI_Info_delete(copy, "alpha"));
  check_info(original);
  int nkeys = 0;
  CHECK_MPI(MPI_Info_get_nkeys(copy, &nkeys));
  CHECK(nkeys == 3);
  CHECK_MPI(MPI_Info_free(&original));
  CHECK_MPI(MPI_Info_get_valuelen(copy, "extra", &len, &flag));
  CHECK(flag == 1 && len == 1);
  CHECK_MPI(MPI_Info_free(&copy));
}

static int count_of(const MPI_Status* s, MPI_Datatype type) {
  int count = -2;
  CHECK_MPI(MPI_Get_count(s, type, &count));
  return count;
}

static int elements_of(const MPI_Status* s, MPI_Datatype type) {
  int count = -2;
  CHECK_MPI(MPI_Get_elements(s, type, &count));
  return count;
}

static void status(void) {
  MPI_Status s;
  CHECK_MPI(MPI_Status_set_elements(&s, MPI_INT, 7));
  CHECK(count_of(&s, MPI_INT) == 7 && elements_of(&s, MPI_INT) == 7);

  /* Pairs of ints: five elements are two and a half pairs. */
  MPI_Datatype pair;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
  CHECK_MPI(MPI_Type_commit(&pair));
  CHECK_MPI(MPI_Status_set_elements(&s, pair, 5));
  CHECK(elements_of(&s, pair) == 5 && count_of(&s, pair) == MPI_UNDEFINED);
  CHECK(count_of(&s, MPI_INT) == 5);
  CHECK_MPI(MPI_Status_set_elements_x(&s, pair, 4));
  CHECK(count_of(&s, pair) == 2);
  MPI_Count elements = 0;
  CHECK_MPI(MPI_Get_elements_x(&s, pair, &elements));
  CHECK(elements == 4);

  /* { int; double }: three elements are one whole struct and the next int. */
  struct mixed {
    int i;
    double d;
  };
  const int lengths[2] = {1, 1};
  const MPI_Aint displs[2] = {offsetof(struct mixed, i), offsetof(struct mixed, d)};
  const MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Datatype mixed;
  CHECK_MPI(MPI_Type_create_struct(2, lengths, displs, types, &mixed));
  CHECK_MPI(MPI_Type_commit(&mixed));
  CHECK_MPI(MPI_Status_set_elements(&s, mixed, 3));
  CHECK(elements_of(&s, mixed) == 3 && count_of(&s, mixed) == MPI_UNDEFINED);
  CHECK_MPI(MPI_Status_set_elements(&s, mixed, 4));
  CHECK(elements_of(&s, mixed) == 4 && count_of(&s, mixed) == 2);
  CHECK_MPI(MPI_Status_set_elements(&s, mixed, 0));
  CHECK(elements_of(&s, mixed) == 0 && count_of(&s, mixed) == 0);

  int flag = -1;
  CHECK_MPI(MPI_Status_set_cancelled(&s, 1));
  CHECK_MPI(MPI_Test_cancelled(&s, &flag));
  CHECK(flag != 0);
  CHECK_MPI(MPI_Status_set_cancelled(&s, 0));
  CHECK_MPI(MPI_Test_cancelled(&s, &flag));
  CHECK(flag == 0);

  CHECK_MPI(MPI_Type_free(&mixed));
  CHECK_MPI(MPI_Type_free(&pair));
}

/* Only the calls that complete many requests write MPI_ERROR, and only theirs (MPI 3.1 section
 * 3.2.5): a program may keep its own value there across the others. */
static void error_field_untouched(int rank) {
  enum { kMine = 12345 };
  const int out = 7;
  int in = 0;
  MPI_Status st;
  st.MPI_ERROR = kMine;
  CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, rank, 31, &in, 1, MPI_INT, rank, 31, MPI_COMM_WORLD,
                         &st));
  CHECK(in == 7 && st.MPI_SOURCE == rank && st.MPI_TAG == 31 && st.MPI_ERROR == kMine);
  MPI_Request r;
  CHECK_MPI(MPI_Isend(&out, 1, MPI_INT, rank, 32, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Probe(rank, 32, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_TAG == 32 && st.MPI_ERROR == kMine);
  CHECK_MPI(MPI_Recv(&in, 1, MPI_INT, rank, 32, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_TAG == 32 && st.MPI_ERROR == kMine);
  CHECK_MPI(MPI_Wait(&r, &st));
  CHECK(st.MPI_ERROR == kMine);
  MPI_Request null = MPI_REQUEST_NULL;
  CHECK_MPI(MPI_Wait(&null, &st));
  CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_ERROR == kMine);
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  info();
  status();
  error_field_untouched(rank);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
