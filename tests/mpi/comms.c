/* Communicators and groups: dup, split, split_type, create, create_group, compare, names,
 * free; group construction, ranks and translation. */
#include <string.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  int result = -1;
  int flag = -1;

  /* Names: the predefined ones, and names set by the program. */
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
  CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14);
  CHECK_MPI(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
  CHECK(strcmp(name, "MPI_COMM_SELF") == 0);

  /* Dup: congruent, separate traffic. */
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, dup, &result));
  CHECK(result == MPI_CONGRUENT);
  CHECK_MPI(MPI_Comm_compare(dup, dup, &result));
  CHECK(result == MPI_IDENT);
  /* A communicator the program has not named has the empty name; names are not inherited
   * (MPI 3.1 section 6.8). */
  CHECK_MPI(MPI_Comm_get_name(dup, name, &len));
  CHECK(strcmp(name, "") == 0 && len == 0);
  CHECK_MPI(MPI_Comm_set_name(dup, "solver"));
  CHECK_MPI(MPI_Comm_get_name(dup, name, &len));
  CHECK(strcmp(name, "solver") == 0 && len == 6);
  MPI_Comm dup_of_named;
  CHECK_MPI(MPI_Comm_dup(dup, &dup_of_named));
  CHECK_MPI(MPI_Comm_get_name(dup_of_named, name, &len));
  CHECK(strcmp(name, "") == 0 && len == 0);
  CHECK_MPI(MPI_Comm_free(&dup_of_named));
  CHECK_MPI(MPI_Comm_test_inter(dup, &flag));
  CHECK(flag == 0);
  /* The same tag on world and dup never cross-match: post on dup first, send on world first. */
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  int on_world = -1;
  int on_dup = -1;
  MPI_Request reqs[4];
  CHECK_MPI(MPI_Irecv(&on_dup, 1, MPI_INT, left, 0, dup, &reqs[0]));
  CHECK_MPI(MPI_Irecv(&on_world, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &reqs[1]));
  const int world_value = 1;
  const int dup_value = 2;
  CHECK_MPI(MPI_Isend(&world_value, 1, MPI_INT, right, 0, MPI_COMM_WORLD, &reqs[2]));
  CHECK_MPI(MPI_Isend(&dup_value, 1, MPI_INT, right, 0, dup, &reqs[3]));
  CHECK_MPI(MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE));
  CHECK(on_world == 1 && on_dup == 2);

  /* Split by parity, ordered by descending rank. */
  MPI_Comm half;
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half));
  CHECK_MPI(MPI_Comm_get_name(half, name, &len));
  CHECK(strcmp(name, "") == 0 && len == 0);
  int hrank = -1;
  int hsize = 0;
  CHECK_MPI(MPI_Comm_rank(half, &hrank));
  CHECK_MPI(MPI_Comm_size(half, &hsize));
  const int members = (size + 1 - rank % 2) / 2;
  CHECK(hsize == members && hrank == members - 1 - rank / 2);
  int hsum = 0;
  CHECK_MPI(MPI_Allreduce(&rank, &hsum, 1, MPI_INT, MPI_SUM, half));
  int expect = 0;
  for (int r = rank % 2; r < size; r += 2) expect += r;
  CHECK(hsum == expect);
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, half, &result));
  CHECK(result == (size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL));
  /* Reversed order: same members, different order. */
  MPI_Comm reversed;
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed));
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, reversed, &result));
  CHECK(result == (size == 1 ? MPI_CONGRUENT : MPI_SIMILAR));
  /* MPI_UNDEFINED gives MPI_COMM_NULL. */
  MPI_Comm only_zero;
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &only_zero));
  CHECK((rank == 0) == (only_zero != MPI_COMM_NULL));

  /* Split by shared memory: every rank runs on this host. */
  MPI_Comm node;
  CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                &node));
  int nsize = 0;
  int nrank = -1;
  CHECK_MPI(MPI_Comm_size(node, &nsize));
  CHECK_MPI(MPI_Comm_rank(node, &nrank));
  CHECK(nsize == size && nrank == rank);
  MPI_Comm none;
  CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, rank, MPI_INFO_NULL, &none));
  CHECK(none == MPI_COMM_NULL);

  /* Groups. */
  MPI_Group world_group;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  int gsize = 0;
  int grank = -1;
  CHECK_MPI(MPI_Group_size(world_group, &gsize));
  CHECK_MPI(MPI_Group_rank(world_group, &grank));
  CHECK(gsize == size && grank == rank);
  /* Even ranks, by incl and by range_incl. */
  int evens[8];
  int n_even = 0;
  for (int r = 0; r < size; r += 2) evens[n_even++] = r;
  MPI_Group even_group;
  MPI_Group even_range;
  CHECK_MPI(MPI_Group_incl(world_group, n_even, evens, &even_group));
  int ranges[1][3] = {{0, size - 1, 2}};
  CHECK_MPI(MPI_Group_range_incl(world_group, 1, ranges, &even_range));
  CHECK_MPI(MPI_Group_compare(even_group, even_range, &result));
  CHECK(result == MPI_IDENT);
  CHECK_MPI(MPI_Group_size(even_group, &gsize));
  CHECK(gsize == n_even);
  CHECK_MPI(MPI_Group_rank(even_group, &grank));
  CHECK(grank == (rank % 2 == 0 ? rank / 2 : MPI_UNDEFINED));
  /* Odd ranks by excluding the even ones; translation between groups. */
  MPI_Group odd_group;
  CHECK_MPI(MPI_Group_excl(world_group, n_even, evens, &odd_group));
  CHECK_MPI(MPI_Group_size(odd_group, &gsize));
  CHECK(gsize == size - n_even);
  int all[8];
  int translated[8];
  for (int r = 0; r < size; ++r) all[r] = r;
  CHECK_MPI(MPI_Group_translate_ranks(world_group, size, all, odd_group, translated));
  for (int r = 0; r < size; ++r) CHECK(translated[r] == (r % 2 == 1 ? r / 2 : MPI_UNDEFINED));
  int pn = MPI_PROC_NULL;
  CHECK_MPI(MPI_Group_translate_ranks(world_group, 1, &pn, even_group, translated));
  CHECK(translated[0] == MPI_PROC_NULL);
  /* A reversed group is similar; a descending range. */
  int down[1][3] = {{size - 1, 0, -1}};
  MPI_Group backwards;
  CHECK_MPI(MPI_Group_range_incl(world_group, 1, down, &backwards));
  CHECK_MPI(MPI_Group_compare(world_group, backwards, &result));
  CHECK(result == (size == 1 ? MPI_IDENT : MPI_SIMILAR));
  CHECK_MPI(MPI_Group_compare(even_group, odd_group, &result));
  CHECK(result == MPI_UNEQUAL);
  /* Set operations keep the first group's order (then the second's, for union). */
  MPI_Group evens_then_odds;
  CHECK_MPI(MPI_Group_union(even_group, odd_group, &evens_then_odds));
  CHECK_MPI(MPI_Group_size(evens_then_odds, &gsize));
  CHECK(gsize == size);
  CHECK_MPI(MPI_Group_translate_ranks(world_group, size, all, evens_then_odds, translated));
  for (int r = 0; r < size; ++r) CHECK(translated[r] == (r % 2 == 0 ? r / 2 : n_even + r / 2));
  MPI_Group same;
  CHECK_MPI(MPI_Group_union(world_group, even_group, &same));
  CHECK_MPI(MPI_Group_compare(same, world_group, &result));
  CHECK(result == MPI_IDENT);
  CHECK_MPI(MPI_Group_free(&same));
  CHECK_MPI(MPI_Group_intersection(evens_then_odds, even_group, &same));
  CHECK_MPI(MPI_Group_compare(same, even_group, &result));
  CHECK(result == MPI_IDENT);
  CHECK_MPI(MPI_Group_free(&same));
  CHECK_MPI(MPI_Group_intersection(even_group, odd_group, &same));
  CHECK_MPI(MPI_Group_compare(same, MPI_GROUP_EMPTY, &result));
  CHECK(result == MPI_IDENT);
  CHECK(same == MPI_GROUP_EMPTY); /* the predefined handle itself, as programs compare it */
  CHECK_MPI(MPI_Group_free(&same));
  CHECK_MPI(MPI_Group_difference(world_group, even_group, &same));
  CHECK_MPI(MPI_Group_compare(same, odd_group, &result));
  CHECK(result == MPI_IDENT);
  CHECK_MPI(MPI_Group_free(&same));
  CHECK_MPI(MPI_Group_difference(even_group, evens_then_odds, &same));
  CHECK_MPI(MPI_Group_size(same, &gsize));
  CHECK(gsize == 0 && same == MPI_GROUP_EMPTY);
  CHECK_MPI(MPI_Group_free(&same));
  CHECK_MPI(MPI_Group_free(&evens_then_odds));
  /* range_excl: the odd ranks are world without {0, 2, ...}; a range may end past the group. */
  CHECK_MPI(MPI_Group_range_excl(world_group, 1, ranges, &same));
  CHECK_MPI(MPI_Group_compare(same, odd_group, &result));
  CHECK(result == MPI_IDENT);
  CHECK_MPI(MPI_Group_free(&same));
  int zero_only[1][3] = {{0, size, size + 1}};
  CHECK_MPI(MPI_Group_range_excl(world_group, 1, zero_only, &same));
  CHECK_MPI(MPI_Group_size(same, &gsize));
  CHECK_MPI(MPI_Group_rank(same, &grank));
  CHECK(gsize == size - 1 && grank == (rank == 0 ? MPI_UNDEFINED : rank - 1));
  CHECK_MPI(MPI_Group_free(&same));

  /* Only the ranks a range produces must be valid, not its end: {0, size, size + 1} is {0}. */
  int past_end[1][3] = {{0, size, size + 1}};
  MPI_Group just_zero;
  CHECK_MPI(MPI_Group_range_incl(world_group, 1, past_end, &just_zero));
  CHECK_MPI(MPI_Group_size(just_zero, &gsize));
  CHECK(gsize == 1);
  CHECK_MPI(MPI_Group_translate_ranks(just_zero, 1, &all[0], world_group, translated));
  CHECK(translated[0] == 0);
  CHECK_MPI(MPI_Group_free(&just_zero));
  if (size % 2 == 1) { /* {0, size, 2} is the even ranks when size itself is odd */
    int evens_past_end[1][3] = {{0, size, 2}};
    MPI_Group evens_again;
    CHECK_MPI(MPI_Group_range_incl(world_group, 1, evens_past_end, &evens_again));
    CHECK_MPI(MPI_Group_compare(evens_again, even_group, &result));
    CHECK(result == MPI_IDENT);
    CHECK_MPI(MPI_Group_free(&evens_again));
  }

  /* Comm_create: collective over world; non-members get MPI_COMM_NULL. */
  MPI_Comm even_comm;
  CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, even_group, &even_comm));
  if (rank % 2 == 0) {
    CHECK(even_comm != MPI_COMM_NULL);
    int ec_rank = -1;
    CHECK_MPI(MPI_Comm_rank(even_comm, &ec_rank));
    CHECK(ec_rank == rank / 2);
    int sum = 0;
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, even_comm));
    CHECK(sum == 2 * (n_even * (n_even - 1) / 2));
    MPI_Group g;
    CHECK_MPI(MPI_Comm_group(even_comm, &g));
    CHECK_MPI(MPI_Group_compare(g, even_group, &result));
    CHECK(result == MPI_IDENT);
    CHECK_MPI(MPI_Group_free(&g));
    CHECK_MPI(MPI_Comm_free(&even_comm));
    CHECK(even_comm == MPI_COMM_NULL);
  } else {
    CHECK(even_comm == MPI_COMM_NULL);
  }

  /* Comm_create with disjoint groups (MPI 3.1 section 6.4.2): the lower and the upper half of
   * world each pass their own group, and each gets a communicator of its group alone. */
  const int lower = rank < size / 2;
  const int first = lower ? 0 : size / 2;
  const int last = lower ? size / 2 - 1 : size - 1;
  int my_half[1][3] = {{first, last, 1}};
  MPI_Group half_group;
  CHECK_MPI(MPI_Group_range_incl(world_group, 1, my_half, &half_group));
  MPI_Comm half_comm;
  CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, half_group, &half_comm));
  CHECK(half_comm != MPI_COMM_NULL);
  CHECK_MPI(MPI_Comm_size(half_comm, &nsize));
  CHECK_MPI(MPI_Comm_rank(half_comm, &nrank));
  CHECK(nsize == last - first + 1 && nrank == rank - first);
  int half_sum = 0;
  CHECK_MPI(MPI_Allreduce(&rank, &half_sum, 1, MPI_INT, MPI_SUM, half_comm));
  CHECK(half_sum == (first + last) * (last - first + 1) / 2);
  CHECK_MPI(MPI_Comm_free(&half_comm));
  CHECK_MPI(MPI_Group_free(&half_group));

  /* Comm_create_group: only the odd ranks call it. */
  if (rank % 2 == 1) {
    MPI_Comm odd_comm;
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, odd_group, 7, &odd_comm));
    CHECK(odd_comm != MPI_COMM_NULL);
    int oc_rank = -1;
    int oc_size = 0;
    CHECK_MPI(MPI_Comm_rank(odd_comm, &oc_rank));
    CHECK_MPI(MPI_Comm_size(odd_comm, &oc_size));
    CHECK(oc_rank == rank / 2 && oc_size == size / 2);
    int token = oc_rank;
    CHECK_MPI(MPI_Bcast(&token, 1, MPI_INT, oc_size - 1, odd_comm));
    CHECK(token == oc_size - 1);
    CHECK_MPI(MPI_Comm_free(&odd_comm));
  }
  /* The even ranks meanwhile keep using world: nothing the odd ranks did interferes. */
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

  /* Comm_create_group over a group of one (every rank, on MPI_COMM_SELF's group). */
  MPI_Group self_group;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_SELF, &self_group));
  MPI_Comm solo;
  CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, self_group, 0, &solo));
  CHECK_MPI(MPI_Comm_size(solo, &nsize));
  CHECK(nsize == 1);
  CHECK_MPI(MPI_Comm_compare(solo, MPI_COMM_SELF, &result));
  CHECK(result == MPI_CONGRUENT);
  CHECK_MPI(MPI_Comm_free(&solo));

  /* The empty group. */
  CHECK_MPI(MPI_Group_size(MPI_GROUP_EMPTY, &gsize));
  CHECK(gsize == 0);
  CHECK_MPI(MPI_Group_rank(MPI_GROUP_EMPTY, &grank));
  CHECK(grank == MPI_UNDEFINED);

  MPI_Group* groups[] = {&world_group, &even_group, &even_range, &odd_group, &backwards,
                         &self_group};
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; ++i) {
    CHECK_MPI(MPI_Group_free(groups[i]));
    CHECK(*groups[i] == MPI_GROUP_NULL);
  }
  CHECK_MPI(MPI_Comm_free(&dup));
  CHECK_MPI(MPI_Comm_free(&half));
  CHECK_MPI(MPI_Comm_free(&reversed));
  if (only_zero != MPI_COMM_NULL) CHECK_MPI(MPI_Comm_free(&only_zero));
  CHECK_MPI(MPI_Comm_free(&node));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
