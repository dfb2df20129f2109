// Communicators, groups and Cartesian topologies.

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <set>

#include "mpi/bridge.hpp"
#include "mpi/mpi_impl.hpp"
#include "sempi/environment.hpp"

namespace sempi::mpi {
namespace {

std::vector<int> members_of(const Communicator& c) {
  std::vector<int> world(static_cast<std::size_t>(c.size()));
  for (int r = 0; r < c.size(); ++r) world[static_cast<std::size_t>(r)] = c.world_rank_of(r);
  return world;
}

int my_world_rank() { return comm_of(MPI_COMM_WORLD).rank(); }

// An empty result is MPI_GROUP_EMPTY itself, as in Open MPI and MPICH: programs compare with it.
MPI_Group new_group(std::vector<int> world_ranks) {
  if (world_ranks.empty()) return MPI_GROUP_EMPTY;
  auto* g = new sempi_mpi_group;
  g->world_ranks = std::move(world_ranks);
  return g;
}

int group_size(const sempi_mpi_group& g) { return static_cast<int>(g.world_ranks.size()); }

void check_group_rank(const sempi_mpi_group& g, int rank) {
  if (rank < 0 || rank >= group_size(g)) {
    fail(MPI_ERR_RANK, "rank " + std::to_string(rank) + " is out of range for a group of size " +
                           std::to_string(group_size(g)));
  }
}

// Ranks must be valid and distinct (MPI_Group_incl / _excl / _range_incl).
void check_distinct(const sempi_mpi_group& g, const std::vector<int>& ranks) {
  std::vector<bool> seen(g.world_ranks.size(), false);
  for (const int r : ranks) {
    check_group_rank(g, r);
    if (seen[static_cast<std::size_t>(r)]) {
      fail(MPI_ERR_RANK, "rank " + std::to_string(r) + " appears twice");
    }
    seen[static_cast<std::size_t>(r)] = true;
  }
}

// The ranks that the (first, last, stride) triplets of MPI_Group_range_incl / _excl denote.
// Only those must be valid and distinct; `last` itself need not be a rank (MPI 3.1 section
// 6.3.2: {0, 3, 2} on three ranks is {0, 2}). Each rank is checked as it is produced, so a
// huge range fails at its first invalid rank instead of being expanded.
std::vector<int> expand_ranges(const sempi_mpi_group& g, int n, const int ranges[][3]) {
  std::vector<int> ranks;
  std::vector<bool> seen(g.world_ranks.size(), false);
  for (int i = 0; i < n; ++i) {
    const int first = ranges[i][0];
    const int last = ranges[i][1];
    const int stride = ranges[i][2];
    if (stride == 0) fail(MPI_ERR_ARG, "range with stride 0");
    // 64 bits: the step past `last` must not overflow.
    for (std::int64_t r = first; stride > 0 ? r <= last : r >= last; r += stride) {
      const int rank = static_cast<int>(r);  // between first and last, so it fits
      check_group_rank(g, rank);
      if (seen[static_cast<std::size_t>(rank)]) {
        fail(MPI_ERR_RANK, "rank " + std::to_string(rank) + " appears twice");
      }
      seen[static_cast<std::size_t>(rank)] = true;
      ranks.push_back(rank);
    }
  }
  return ranks;
}

const CartTopology& cart_of(const sempi_mpi_comm& h) {
  if (!h.cart) fail(MPI_ERR_TOPOLOGY, "the communicator has no Cartesian topology");
  return *h.cart;
}

std::vector<int> coords_of(const CartTopology& t, int rank) {
  std::vector<int> coords(t.dims.size());
  for (std::size_t i = t.dims.size(); i-- > 0;) {
    coords[i] = rank % t.dims[i];
    rank /= t.dims[i];
  }
  return coords;
}

// Rank of coordinates; periodic dimensions wrap, others give -1 when outside.
int rank_of(const CartTopology& t, const std::vector<int>& coords) {
  int rank = 0;
  for (std::size_t i = 0; i < t.dims.size(); ++i) {
    int c = coords[i];
    if (t.periods[i] != 0) {
      c = ((c % t.dims[i]) + t.dims[i]) % t.dims[i];
    } else if (c < 0 || c >= t.dims[i]) {
      return -1;
    }
    rank = rank * t.dims[i] + c;
  }
  return rank;
}

// Groups this communicator's ranks by host: rank 0 collects every processor name on a private
// duplicate (so no user message can interfere) and hands each rank the index of its host.
int host_color(const Communicator& c) {
  const Communicator dup = c.dup();
  std::array<char, MPI_MAX_PROCESSOR_NAME> mine{};
  const std::string name = Environment::processor_name();
  std::memcpy(mine.data(), name.data(), std::min(name.size(), mine.size() - 1));
  constexpr int kTag = 0;
  if (dup.rank() != 0) {
    dup.send_bytes(mine.data(), mine.size(), 0, kTag);
    int color = 0;
    dup.recv_bytes(&color, sizeof color, 0, kTag);
    return color;
  }
  std::vector<std::string> hosts{mine.data()};
  std::vector<int> colors(static_cast<std::size_t>(dup.size()), 0);
  for (int r = 1; r < dup.size(); ++r) {
    std::array<char, MPI_MAX_PROCESSOR_NAME> theirs{};
    dup.recv_bytes(theirs.data(), theirs.size(), r, kTag);
    theirs.back() = '\0';
    const auto it = std::find(hosts.begin(), hosts.end(), std::string(theirs.data()));
    colors[static_cast<std::size_t>(r)] = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) hosts.emplace_back(theirs.data());
  }
  for (int r = 1; r < dup.size(); ++r) {
    dup.send_bytes(&colors[static_cast<std::size_t>(r)], sizeof(int), r, kTag);
  }
  return colors[0];
}

void free_comm_handle(MPI_Comm* comm) {
  auto& h = comm_handle(*comm);
  if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF) {
    fail(MPI_ERR_COMM, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed");
  }
  delete_attributes(*comm);
  h.magic = 0;
  delete &h;
  *comm = MPI_COMM_NULL;
}

}  // namespace
}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  return guarded(comm, "MPI_Comm_rank", [&] {
    require_output(rank, "rank");
    *rank = comm_of(comm).rank();
  });
}

int MPI_Comm_size(MPI_Comm comm, int* size) {
  return guarded(comm, "MPI_Comm_size", [&] {
    require_output(size, "size");
    *size = comm_of(comm).size();
  });
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  return guarded(comm, "MPI_Comm_dup", [&] {
    require_output(newcomm, "newcomm");
    // Whatever fails below, the program finds no handle it could take for the copy (as Open
    // MPI leaves it).
    *newcomm = MPI_COMM_NULL;
    auto& h = comm_handle(comm);
    MPI_Comm dup = new_comm_handle(h.comm.dup(), h.errhandler->load());
    dup->cart = h.cart;  // a duplicate keeps the topology
    try {
      copy_attributes(comm, dup);
    } catch (...) {
      try {
        delete_attributes(dup);  // the copies made so far
      } catch (...) {  // the copy callback's error is the one to report
      }
      delete dup;
      throw;
    }
    *newcomm = dup;
  });
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  return guarded(comm, "MPI_Comm_split", [&] {
    require_output(newcomm, "newcomm");
    auto& h = comm_handle(comm);
    *newcomm = new_comm_handle(h.comm.split(color, key), h.errhandler->load());
  });
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm* newcomm) {
  return guarded(comm, "MPI_Comm_split_type", [&] {
    require_output(newcomm, "newcomm");
    auto& h = comm_handle(comm);
    if (info != MPI_INFO_NULL) info_of(info);
    if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED) {
      fail(MPI_ERR_ARG, "unknown split type " + std::to_string(split_type) +
                            " (sempi provides MPI_COMM_TYPE_SHARED)");
    }
    // Every rank takes part in the exchange, including those that opt out.
    const int color = host_color(h.comm);
    *newcomm = new_comm_handle(
        h.comm.split(split_type == MPI_UNDEFINED ? MPI_UNDEFINED : color, key),
        h.errhandler->load());
  });
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  return guarded(comm, "MPI_Comm_create", [&] {
    auto& h = comm_handle(comm);
    const auto& g = group_of(group);
    require_output(newcomm, "newcomm");
    const auto members = members_of(h.comm);
    for (const int w : g.world_ranks) {
      if (std::find(members.begin(), members.end(), w) == members.end()) {
        fail(MPI_ERR_GROUP, "the group is not a subset of the communicator's group");
      }
    }
    const int me = members[static_cast<std::size_t>(h.comm.rank())];
    const auto it = std::find(g.world_ranks.begin(), g.world_ranks.end(), me);
    const bool member = it != g.world_ranks.end();
    // Callers may pass different, disjoint groups (MPI 3.1 section 6.4.2): each group gets a
    // communicator of its own, so the color names the group by its lowest parent rank (the
    // same for every member of it) and the key orders the members as the group does.
    int color = MPI_UNDEFINED;
    int key = 0;
    if (member) {
      color = static_cast<int>(members.size());
      for (const int w : g.world_ranks) {
        const auto parent_rank = std::find(members.begin(), members.end(), w) - members.begin();
        color = std::min(color, static_cast<int>(parent_rank));
      }
      key = static_cast<int>(it - g.world_ranks.begin());
    }
    *newcomm = new_comm_handle(h.comm.split(color, key), h.errhandler->load());
  });
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  return guarded(comm, "MPI_Comm_create_group", [&] {
    auto& h = comm_handle(comm);
    const auto& g = group_of(group);
    require_output(newcomm, "newcomm");
    if (tag < 0 || tag > sempi::TAG_UB) fail(MPI_ERR_TAG, "invalid tag " + std::to_string(tag));
    const auto members = members_of(h.comm);
    std::vector<int> parent_ranks;
    for (const int w : g.world_ranks) {
      const auto it = std::find(members.begin(), members.end(), w);
      if (it == members.end()) {
        fail(MPI_ERR_GROUP, "the group is not a subset of the communicator's group");
      }
      parent_ranks.push_back(static_cast<int>(it - members.begin()));
    }
    const int me = h.comm.rank();
    if (std::find(parent_ranks.begin(), parent_ranks.end(), me) == parent_ranks.end()) {
      *newcomm = MPI_COMM_NULL;  // not a member: nothing to create
      return;
    }
    *newcomm = new_comm_handle(
        sempi::mpi_bridge::create_from_members(h.comm, parent_ranks, h.comm.name() + ".group", tag),
        h.errhandler->load());
  });
}

int MPI_Comm_free(MPI_Comm* comm) {
  return guarded(comm != nullptr ? *comm : MPI_COMM_WORLD, "MPI_Comm_free", [&] {
    require_output(comm, "comm");
    free_comm_handle(comm);
  });
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  return guarded(comm1, "MPI_Comm_compare", [&] {
    const auto& a = comm_of(comm1);
    const auto& b = comm_of(comm2);
    require_output(result, "result");
    if (a == b) {
      *result = MPI_IDENT;
      return;
    }
    const auto ma = members_of(a);
    const auto mb = members_of(b);
    if (ma == mb) {
      *result = MPI_CONGRUENT;
    } else if (std::set<int>(ma.begin(), ma.end()) == std::set<int>(mb.begin(), mb.end())) {
      *result = MPI_SIMILAR;
    } else {
      *result = MPI_UNEQUAL;
    }
  });
}

int MPI_Comm_set_name(MPI_Comm comm, const char* comm_name) {
  return guarded(comm, "MPI_Comm_set_name", [&] {
    auto& h = comm_handle(comm);
    if (comm_name == nullptr) fail(MPI_ERR_ARG, "null name");
    std::string name(comm_name);
    if (name.size() >= MPI_MAX_OBJECT_NAME) name.resize(MPI_MAX_OBJECT_NAME - 1);
    // This is the name the job's policy uses for the communicator.
    h.comm.set_name(name);
    h.renamed = true;
  });
}

int MPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen) {
  return guarded(comm, "MPI_Comm_get_name", [&] {
    require_output(comm_name, "comm_name");
    require_output(resultlen, "resultlen");
    auto& h = comm_handle(comm);
    // Until the program names it, a communicator's MPI name is the predefined one or empty
    // (MPI 3.1 section 6.8; duplicates do not inherit names). The runtime's own name
    // ("world.dup", ...) is what policies match and stays internal.
    std::string name;
    if (h.renamed.load()) {
      name = h.comm.name();
    } else if (h.predefined_name != nullptr) {
      name = h.predefined_name;
    }
    if (name.size() >= MPI_MAX_OBJECT_NAME) name.resize(MPI_MAX_OBJECT_NAME - 1);
    std::memcpy(comm_name, name.c_str(), name.size() + 1);
    *resultlen = static_cast<int>(name.size());
  });
}

int MPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  return guarded(comm, "MPI_Comm_test_inter", [&] {
    require_output(flag, "flag");
    comm_handle(comm);
    *flag = 0;  // sempi has intracommunicators only
  });
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  return guarded(comm, "MPI_Comm_group", [&] {
    require_output(group, "group");
    *group = new_group(members_of(comm_of(comm)));
  });
}

int MPI_Group_size(MPI_Group group, int* size) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_size", [&] {
    const auto& g = group_of(group);
    require_output(size, "size");
    *size = group_size(g);
  });
}

int MPI_Group_rank(MPI_Group group, int* rank) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_rank", [&] {
    const auto& g = group_of(group);
    require_output(rank, "rank");
    const auto it = std::find(g.world_ranks.begin(), g.world_ranks.end(), my_world_rank());
    *rank = it == g.world_ranks.end() ? MPI_UNDEFINED
                                      : static_cast<int>(it - g.world_ranks.begin());
  });
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_incl", [&] {
    const auto& g = group_of(group);
    check_count(n, "number of ranks");
    if (n > 0) require_input(ranks, "ranks");
    require_output(newgroup, "newgroup");
    const std::vector<int> chosen(ranks, ranks + n);
    check_distinct(g, chosen);
    std::vector<int> world;
    for (const int r : chosen) world.push_back(g.world_ranks[static_cast<std::size_t>(r)]);
    *newgroup = new_group(std::move(world));
  });
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_excl", [&] {
    const auto& g = group_of(group);
    check_count(n, "number of ranks");
    if (n > 0) require_input(ranks, "ranks");
    require_output(newgroup, "newgroup");
    const std::vector<int> excluded(ranks, ranks + n);
    check_distinct(g, excluded);
    std::vector<int> world;
    for (int r = 0; r < group_size(g); ++r) {
      if (std::find(excluded.begin(), excluded.end(), r) == excluded.end()) {
        world.push_back(g.world_ranks[static_cast<std::size_t>(r)]);
      }
    }
    *newgroup = new_group(std::move(world));
  });
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_range_incl", [&] {
    const auto& g = group_of(group);
    check_count(n, "number of ranges");
    if (n > 0) require_input(ranges, "ranges");
    require_output(newgroup, "newgroup");
    std::vector<int> world;
    for (const int r : expand_ranges(g, n, ranges)) {
      world.push_back(g.world_ranks[static_cast<std::size_t>(r)]);
    }
    *newgroup = new_group(std::move(world));
  });
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_range_excl", [&] {
    const auto& g = group_of(group);
    check_count(n, "number of ranges");
    if (n > 0) require_input(ranges, "ranges");
    require_output(newgroup, "newgroup");
    std::vector<bool> excluded(g.world_ranks.size(), false);
    for (const int r : expand_ranges(g, n, ranges)) {
      excluded[static_cast<std::size_t>(r)] = true;
    }
    std::vector<int> world;
    for (std::size_t r = 0; r < g.world_ranks.size(); ++r) {
      if (!excluded[r]) world.push_back(g.world_ranks[r]);
    }
    *newgroup = new_group(std::move(world));
  });
}

// Set operations (MPI 3.1 section 6.3.2): the result keeps group1's order, then (union)
// group2's for the members group1 lacks.
int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_union", [&] {
    const auto& a = group_of(group1).world_ranks;
    const auto& b = group_of(group2).world_ranks;
    require_output(newgroup, "newgroup");
    std::vector<int> world = a;
    for (const int w : b) {
      if (std::find(a.begin(), a.end(), w) == a.end()) world.push_back(w);
    }
    *newgroup = new_group(std::move(world));
  });
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_intersection", [&] {
    const auto& a = group_of(group1).world_ranks;
    const auto& b = group_of(group2).world_ranks;
    require_output(newgroup, "newgroup");
    std::vector<int> world;
    for (const int w : a) {
      if (std::find(b.begin(), b.end(), w) != b.end()) world.push_back(w);
    }
    *newgroup = new_group(std::move(world));
  });
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_difference", [&] {
    const auto& a = group_of(group1).world_ranks;
    const auto& b = group_of(group2).world_ranks;
    require_output(newgroup, "newgroup");
    std::vector<int> world;
    for (const int w : a) {
      if (std::find(b.begin(), b.end(), w) == b.end()) world.push_back(w);
    }
    *newgroup = new_group(std::move(world));
  });
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[]) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_translate_ranks", [&] {
    const auto& a = group_of(group1);
    const auto& b = group_of(group2);
    check_count(n, "number of ranks");
    if (n > 0) require_input(ranks1, "ranks1");
    if (n > 0) require_output(ranks2, "ranks2");
    for (int i = 0; i < n; ++i) {
      if (ranks1[i] == MPI_PROC_NULL) {
        ranks2[i] = MPI_PROC_NULL;
        continue;
      }
      check_group_rank(a, ranks1[i]);
      const int w = a.world_ranks[static_cast<std::size_t>(ranks1[i])];
      const auto it = std::find(b.world_ranks.begin(), b.world_ranks.end(), w);
      ranks2[i] = it == b.world_ranks.end() ? MPI_UNDEFINED
                                            : static_cast<int>(it - b.world_ranks.begin());
    }
  });
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_compare", [&] {
    const auto& a = group_of(group1).world_ranks;
    const auto& b = group_of(group2).world_ranks;
    require_output(result, "result");
    if (a == b) {
      *result = MPI_IDENT;
    } else if (std::set<int>(a.begin(), a.end()) == std::set<int>(b.begin(), b.end())) {
      *result = MPI_SIMILAR;
    } else {
      *result = MPI_UNEQUAL;
    }
  });
}

int MPI_Group_free(MPI_Group* group) {
  return guarded(MPI_COMM_WORLD, "MPI_Group_free", [&] {
    require_output(group, "group");
    auto& g = group_of(*group);
    if (!g.predefined) {  // freeing MPI_GROUP_EMPTY only clears the handle
      g.magic = 0;
      delete &g;
    }
    *group = MPI_GROUP_NULL;
  });
}

// --- Cartesian topologies ----------------------------------------------------------------------

namespace {

// The prime factors of n, smallest first.
std::vector<int> prime_factors(int n) {
  std::vector<int> factors;
  for (int p = 2; p <= n / p; ++p) {  // p <= n / p: p * p could overflow
    while (n % p == 0) {
      factors.push_back(p);
      n /= p;
    }
  }
  if (n > 1) factors.push_back(n);
  return factors;
}

// All divisors of n, ascending, from its prime factors (at most 1,600 for an int).
std::vector<int> divisors_of(int n) {
  std::vector<int> divisors = {1};
  const auto factors = prime_factors(n);
  for (std::size_t i = 0; i < factors.size();) {
    const int p = factors[i];
    std::size_t k = 0;
    while (i < factors.size() && factors[i] == p) ++i, ++k;
    const std::size_t before = divisors.size();
    long long power = 1;
    for (std::size_t e = 0; e < k; ++e) {
      power *= p;
      for (std::size_t j = 0; j < before; ++j) {
        divisors.push_back(static_cast<int>(divisors[j] * power));
      }
    }
  }
  std::sort(divisors.begin(), divisors.end());
  return divisors;
}

// Appends n split into `count` factors, none above `cap`, non-increasing and lexicographically
// smallest (the largest as small as it gets, then the next, ...): the most balanced grid.
// `divisors` are those of the original number, which n divides. False, `out` as it was, if
// there is no such split.
bool append_balanced_factors(int n, int count, int cap, const std::vector<int>& divisors,
                             std::vector<int>& out) {
  if (count == 1) {
    if (n > cap) return false;
    out.push_back(n);
    return true;
  }
  for (const int d : divisors) {
    if (d > cap || d > n) break;
    if (n % d != 0) continue;
    // The largest factor is at least the count-th root of n.
    long long power = 1;
    for (int i = 0; i < count && power < n; ++i) power *= d;
    if (power < n) continue;
    out.push_back(d);
    if (append_balanced_factors(n / d, count - 1, d, divisors, out)) return true;
    out.pop_back();
  }
  return false;
}

}  // namespace

int MPI_Dims_create(int nnodes, int ndims, int dims[]) {
  return guarded(MPI_COMM_WORLD, "MPI_Dims_create", [&] {
    if (ndims > 0) require_output(dims, "dims");
    if (nnodes < 1) fail(MPI_ERR_ARG, "nnodes must be positive");
    if (ndims < 0) fail(MPI_ERR_DIMS, "negative ndims");
    long long fixed = 1;  // stays <= nnodes: a larger product cannot divide it
    int open = 0;
    for (int i = 0; i < ndims; ++i) {
      if (dims[i] < 0) fail(MPI_ERR_DIMS, "negative dimension " + std::to_string(dims[i]));
      if (dims[i] == 0) {
        ++open;
        continue;
      }
      fixed *= dims[i];
      if (fixed > nnodes) {
        fail(MPI_ERR_DIMS, "the given dimensions multiply to more than " + std::to_string(nnodes));
      }
    }
    if (nnodes % fixed != 0) {
      fail(MPI_ERR_DIMS, "the given dimensions do not divide " + std::to_string(nnodes));
    }
    const int rest = static_cast<int>(nnodes / fixed);
    if (open == 0) {
      if (rest != 1) fail(MPI_ERR_DIMS, "the given dimensions do not multiply to nnodes");
      return;
    }
    // Dimensions beyond the number of prime factors are 1 whatever the split.
    const int split = std::min(open, std::max(1, static_cast<int>(prime_factors(rest).size())));
    std::vector<int> out;
    (void)append_balanced_factors(rest, split, rest, divisors_of(rest), out);  // always a split
    out.resize(static_cast<std::size_t>(open), 1);
    std::size_t next = 0;
    for (int i = 0; i < ndims; ++i) {
      if (dims[i] == 0) dims[i] = out[next++];
    }
  });
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm* comm_cart) {
  (void)reorder;  // ranks keep their order: all ranks share one host
  return guarded(comm_old, "MPI_Cart_create", [&] {
    auto& h = comm_handle(comm_old);
    if (ndims < 0) fail(MPI_ERR_DIMS, "negative ndims");
    if (ndims > 0) require_input(dims, "dims");
    if (ndims > 0) require_input(periods, "periods");
    require_output(comm_cart, "comm_cart");
    auto topo = std::make_shared<CartTopology>();
    long long cells = 1;  // checked at each step, so the product cannot wrap
    for (int i = 0; i < ndims; ++i) {
      if (dims[i] <= 0) fail(MPI_ERR_DIMS, "dimension " + std::to_string(i) + " is not positive");
      cells *= dims[i];
      if (cells > h.comm.size()) {
        fail(MPI_ERR_TOPOLOGY, "the grid has more cells than the communicator's " +
                                   std::to_string(h.comm.size()) + " ranks");
      }
      topo->dims.push_back(dims[i]);
      topo->periods.push_back(periods[i] != 0 ? 1 : 0);
    }
    const int rank = h.comm.rank();
    *comm_cart = new_comm_handle(h.comm.split(rank < cells ? 0 : MPI_UNDEFINED, rank),
                                 h.errhandler->load());
    if (*comm_cart != MPI_COMM_NULL) (*comm_cart)->cart = std::move(topo);
  });
}

int MPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  return guarded(comm, "MPI_Cartdim_get", [&] {
    const auto& t = cart_of(comm_handle(comm));
    require_output(ndims, "ndims");
    *ndims = static_cast<int>(t.dims.size());
  });
}

int MPI_Topo_test(MPI_Comm comm, int* status) {
  return guarded(comm, "MPI_Topo_test", [&] {
    const bool cartesian = comm_handle(comm).cart != nullptr;
    require_output(status, "status");
    *status = cartesian ? MPI_CART : MPI_UNDEFINED;
  });
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  return guarded(comm, "MPI_Cart_get", [&] {
    auto& h = comm_handle(comm);
    const auto& t = cart_of(h);
    if (maxdims > 0) require_output(dims, "dims");
    if (maxdims > 0) require_output(periods, "periods");
    if (maxdims > 0) require_output(coords, "coords");
    const auto mine = coords_of(t, h.comm.rank());
    const int n = std::min(maxdims, static_cast<int>(t.dims.size()));
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      dims[i] = t.dims[k];
      periods[i] = t.periods[k];
      coords[i] = mine[k];
    }
  });
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  return guarded(comm, "MPI_Cart_coords", [&] {
    auto& h = comm_handle(comm);
    const auto& t = cart_of(h);
    if (maxdims > 0) require_output(coords, "coords");
    if (rank < 0 || rank >= h.comm.size()) {
      fail(MPI_ERR_RANK, "rank " + std::to_string(rank) + " is out of range");
    }
    if (maxdims < static_cast<int>(t.dims.size())) fail(MPI_ERR_ARG, "maxdims is too small");
    const auto c = coords_of(t, rank);
    std::copy(c.begin(), c.end(), coords);
  });
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  return guarded(comm, "MPI_Cart_rank", [&] {
    const auto& t = cart_of(comm_handle(comm));
    if (!t.dims.empty()) require_input(coords, "coords");
    require_output(rank, "rank");
    const std::vector<int> c(coords, coords + t.dims.size());
    *rank = rank_of(t, c);
    if (*rank < 0) fail(MPI_ERR_RANK, "coordinates outside a non-periodic dimension");
  });
}

int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest) {
  return guarded(comm, "MPI_Cart_shift", [&] {
    auto& h = comm_handle(comm);
    const auto& t = cart_of(h);
    require_output(rank_source, "rank_source");
    require_output(rank_dest, "rank_dest");
    if (direction < 0 || direction >= static_cast<int>(t.dims.size())) {
      fail(MPI_ERR_ARG, "direction " + std::to_string(direction) + " is out of range");
    }
    auto c = coords_of(t, h.comm.rank());
    const auto d = static_cast<std::size_t>(direction);
    const int here = c[d];
    // In 64 bits: here + disp overflows an int for a displacement near INT_MAX or INT_MIN.
    const auto shifted = [&](std::int64_t to) {
      const std::int64_t n = t.dims[d];
      if (t.periods[d] != 0) return static_cast<int>(((to % n) + n) % n);
      return to < 0 || to >= n ? -1 : static_cast<int>(to);  // -1: outside (rank_of)
    };
    c[d] = shifted(std::int64_t{here} + disp);
    const int dest = rank_of(t, c);
    c[d] = shifted(std::int64_t{here} - disp);
    const int source = rank_of(t, c);
    *rank_dest = dest < 0 ? MPI_PROC_NULL : dest;
    *rank_source = source < 0 ? MPI_PROC_NULL : source;
  });
}

}  // extern "C"
