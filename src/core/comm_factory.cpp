#include "core/comm_factory.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "core/internal_tags.hpp"
#include "sempi/constants.hpp"
#include "sempi/error.hpp"

namespace sempi::detail {
namespace {

using Entry = std::array<std::int64_t, 3>;  // color, key, next free context

void check(Engine& engine, const std::shared_ptr<RequestState>& request) {
  engine.wait(*request);
  if (request->status.error != ErrorClass::success) {
    throw Error(request->status.error, "communicator creation failed: " + request->error_message);
  }
}

// Gather to rank 0, then rank 0 sends the whole table to everyone. Linear, but communicator
// creation is rare and the table is tiny.
std::vector<Entry> allgather_entries(Engine& engine, const std::shared_ptr<const CommState>& comm,
                                     const Entry& mine) {
  const int size = comm->size();
  std::vector<Entry> table(static_cast<std::size_t>(size));
  const std::size_t table_bytes = table.size() * sizeof(Entry);
  if (comm->rank == 0) {
    table[0] = mine;
    for (int r = 1; r < size; ++r) {
      check(engine, engine.irecv(comm, true, &table[static_cast<std::size_t>(r)], sizeof(Entry), r,
                                 internal_tag::kCommCreate));
    }
    std::vector<std::shared_ptr<RequestState>> sends;
    for (int r = 1; r < size; ++r) {
      sends.push_back(engine.isend(*comm, OpKind::comm_create, table.data(), table_bytes, r,
                                   internal_tag::kCommCreate, false));
    }
    for (auto& s : sends) check(engine, s);
  } else {
    check(engine, engine.isend(*comm, OpKind::comm_create, &mine, sizeof(Entry), 0, internal_tag::kCommCreate,
                               false));
    check(engine, engine.irecv(comm, true, table.data(), table_bytes, 0,
                               internal_tag::kCommCreate));
  }
  return table;
}

}  // namespace

std::shared_ptr<const CommState> split_communicator(Engine& engine,
                                                    const std::shared_ptr<const CommState>& parent,
                                                    int color, int key,
                                                    const std::string& name) {
  const Entry mine{color, key, static_cast<std::int64_t>(engine.next_context())};
  const auto table = allgather_entries(engine, parent, mine);

  std::int64_t context = 0;
  for (const auto& e : table) context = std::max(context, e[2]);
  context += context % 2;  // p2p contexts are even; collective traffic uses context + 1
  engine.reserve_contexts_below(static_cast<std::uint32_t>(context + 2));
  if (color == UNDEFINED) return nullptr;

  struct Member {
    std::int64_t key;
    int parent_rank;
  };
  std::vector<Member> members;
  for (int r = 0; r < parent->size(); ++r) {
    const auto& e = table[static_cast<std::size_t>(r)];
    if (e[0] == color) members.push_back({e[1], r});
  }
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.parent_rank < b.parent_rank;
  });
  std::vector<int> world_ranks;
  for (const auto& m : members) {
    world_ranks.push_back(parent->world_ranks[static_cast<std::size_t>(m.parent_rank)]);
  }
  const int me = parent->world_ranks[static_cast<std::size_t>(parent->rank)];
  return std::make_shared<const CommState>(static_cast<std::uint32_t>(context),
                                           std::move(world_ranks), me, name);
}

}  // namespace sempi::detail
