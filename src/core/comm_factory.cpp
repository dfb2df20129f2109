#include "core/comm_factory.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "core/internal_tags.hpp"
#include "sempi/constants.hpp"
#include "sempi/error.hpp"

namespace sempi::detail {
namespace {

using Entry = std::array<std::int64_t, 3>;  // color, key, and (from the root) the new context

void check(Engine& engine, const std::shared_ptr<RequestState>& request) {
  engine.wait(*request);
  if (request->status.error != ErrorClass::success) {
    throw Error(request->status.error, "communicator creation failed: " + request->error_message);
  }
}

// Gather to rank 0, which allocates the new context from its own share of the id space
// (Engine::allocate_context) and sends the whole table to everyone. Linear, but communicator
// creation is rare and the table is tiny. `tag` keeps concurrent creations apart.
std::vector<Entry> allgather_entries(Engine& engine, const std::shared_ptr<const CommState>& comm,
                                     const Entry& mine, int tag) {
  const int size = comm->size();
  std::vector<Entry> table(static_cast<std::size_t>(size));
  const std::size_t table_bytes = table.size() * sizeof(Entry);
  if (comm->rank == 0) {
    table[0] = mine;
    for (int r = 1; r < size; ++r) {
      check(engine, engine.irecv(comm, true, &table[static_cast<std::size_t>(r)], sizeof(Entry), r,
                                 tag));
    }
    table[0][2] = engine.allocate_context();
    std::vector<std::shared_ptr<RequestState>> sends;
    for (int r = 1; r < size; ++r) {
      sends.push_back(
          engine.isend(*comm, OpKind::comm_create, table.data(), table_bytes, r, tag, false));
    }
    for (auto& s : sends) check(engine, s);
  } else {
    check(engine, engine.isend(*comm, OpKind::comm_create, &mine, sizeof(Entry), 0, tag, false));
    check(engine, engine.irecv(comm, true, table.data(), table_bytes, 0, tag));
  }
  return table;
}

// Policy refusals of communicator creation: audited, and thrown unless the policy is a dry run.
// Every member evaluates the same rule on the same data, so every member throws the same error
// and none waits for another.
void refuse(Engine& engine, const std::string& name, const policy::Decision& decision) {
  if (audit::AuditLog* log = engine.audit()) {
    log->event("comm.refuse", false, decision.explanation,
               {{"comm", name}, {"rule", decision.rule},
                {"dry_run", !engine.policy()->enforcing()}});
  }
  if (engine.policy()->enforcing()) {
    throw Error(ErrorClass::policy, "communicator creation refused by policy: " +
                                        decision.explanation + " (rule " + decision.rule + ")");
  }
}

}  // namespace

std::shared_ptr<const CommState> split_communicator(Engine& engine,
                                                    const std::shared_ptr<const CommState>& parent,
                                                    int color, int key,
                                                    const std::string& name, int exchange_tag) {
  const policy::Policy* rules = engine.policy();
  if (rules != nullptr) {
    // The agreement itself is traffic on the parent: refuse up front rather than leave some
    // members waiting for entries their peers were not allowed to send.
    const auto decision = rules->check_comm_create(parent->name(), parent->world_ranks);
    if (!decision.allowed) refuse(engine, name, decision);
  }
  const auto table = allgather_entries(engine, parent, Entry{color, key, 0}, exchange_tag);
  // Even: p2p traffic; collective traffic uses context + 1. Groups of different colors share
  // it, as no rank is in two of them.
  const std::int64_t context = table[0][2];
  const int root_world = parent->world_ranks[0];
  if (context <= 0 || context > std::int64_t{UINT32_MAX} - 1 ||
      !engine.adopt_context(static_cast<std::uint32_t>(context), root_world)) {
    throw Error(ErrorClass::intern, "communicator creation: rank " + std::to_string(root_world) +
                                        " handed out context id " + std::to_string(context) +
                                        ", which is not its own to give or is already in use");
  }
  const Entry& mine_back = table[static_cast<std::size_t>(parent->rank)];
  if (parent->rank != 0 && (mine_back[0] != color || mine_back[1] != key)) {
    throw Error(ErrorClass::intern, "communicator creation: rank " + std::to_string(root_world) +
                                        " altered this rank's color or key");
  }

  struct Member {
    std::int64_t key;
    int parent_rank;
  };
  const auto group_of = [&](std::int64_t c) {
    std::vector<Member> members;
    for (int r = 0; r < parent->size(); ++r) {
      const auto& e = table[static_cast<std::size_t>(r)];
      if (e[0] == c) members.push_back({e[1], r});
    }
    std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
      return a.key != b.key ? a.key < b.key : a.parent_rank < b.parent_rank;
    });
    std::vector<int> world_ranks;
    for (const auto& m : members) {
      world_ranks.push_back(parent->world_ranks[static_cast<std::size_t>(m.parent_rank)]);
    }
    return world_ranks;
  };
  if (rules != nullptr) {
    // Membership: check every group this split creates, in color order, so that all members
    // of the parent (UNDEFINED ones included) fail together with the same error.
    std::vector<std::int64_t> colors;
    for (const auto& e : table) {
      if (e[0] != UNDEFINED) colors.push_back(e[0]);
    }
    std::sort(colors.begin(), colors.end());
    colors.erase(std::unique(colors.begin(), colors.end()), colors.end());
    for (const auto c : colors) {
      const auto decision = rules->check_members(name, group_of(c));
      if (!decision.allowed) refuse(engine, name, decision);
    }
  }
  if (color == UNDEFINED) return nullptr;

  const int me = parent->world_ranks[static_cast<std::size_t>(parent->rank)];
  // The deleter tells the engine (if it still exists) that the last handle is gone, so the
  // audit log records "comm.free" and late frames for the context are denied.
  std::shared_ptr<const CommState> created(
      new CommState(static_cast<std::uint32_t>(context), group_of(color), me, name),
      [freed = engine.freed_contexts()](const CommState* state) {
        if (auto queue = freed.lock()) {
          std::lock_guard lock(queue->mu);
          queue->contexts.push_back(state->context);
          queue->any = true;
        }
        delete state;
      });
  engine.register_comm(*created);
  return created;
}

}  // namespace sempi::detail
