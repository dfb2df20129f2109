// Attribute caching on communicators (MPI 3.1 section 6.7): keys with copy and delete
// callbacks, values cached per communicator, copied by MPI_Comm_dup and deleted by
// MPI_Comm_free. Callbacks are user code that may call MPI again, so no lock is held while one
// runs.

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>

#include "mpi/mpi_impl.hpp"

namespace sempi::mpi {
namespace {

// Keys still valid for new attributes. Ids start above the predefined keys.
struct KeyvalRegistry {
  std::mutex mu;
  std::map<int, std::shared_ptr<const Keyval>> keys;
  int next = 100;
};
KeyvalRegistry g_keyvals;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

std::shared_ptr<const Keyval> keyval_of(int id) {
  if (predefined_attribute(id) != nullptr) {
    fail(MPI_ERR_KEYVAL, "attribute key " + std::to_string(id) + " is predefined (read only)");
  }
  std::lock_guard lock(g_keyvals.mu);
  const auto it = g_keyvals.keys.find(id);
  if (it == g_keyvals.keys.end()) {
    fail(MPI_ERR_KEYVAL, "attribute key " + std::to_string(id) + " is not a valid key");
  }
  return it->second;
}

std::vector<Attribute>::iterator find_attribute(std::vector<Attribute>& attributes, int id) {
  return std::find_if(attributes.begin(), attributes.end(),
                      [id](const Attribute& a) { return a.key->id == id; });
}

void run_delete(MPI_Comm comm, const Attribute& a) {
  if (a.key->destroy == nullptr) return;
  const int code = a.key->destroy(comm, a.key->id, a.value, a.key->extra_state);
  if (code != MPI_SUCCESS) {
    fail(code, "the delete callback of attribute key " + std::to_string(a.key->id) +
                   " returned error " + std::to_string(code));
  }
}

}  // namespace

void copy_attributes(MPI_Comm from, MPI_Comm to) {
  std::vector<Attribute> snapshot;
  {
    std::lock_guard lock(from->attributes_mu);
    snapshot = from->attributes;
  }
  for (const auto& a : snapshot) {
    if (a.key->copy == nullptr) continue;
    void* copied = nullptr;
    int flag = 0;
    const int code = a.key->copy(from, a.key->id, a.key->extra_state, a.value, &copied, &flag);
    if (code != MPI_SUCCESS) {
      fail(code, "the copy callback of attribute key " + std::to_string(a.key->id) +
                     " returned error " + std::to_string(code));
    }
    if (flag == 0) continue;
    std::lock_guard lock(to->attributes_mu);
    to->attributes.push_back({a.key, copied});
  }
}

void delete_attributes(MPI_Comm comm) {
  std::vector<Attribute> removed;
  {
    std::lock_guard lock(comm->attributes_mu);
    removed.swap(comm->attributes);
  }
  // Every callback runs, even after one fails; a failed one's attribute stays cached (as with
  // MPI_Comm_delete_attr), so a retried MPI_Comm_free calls it again. The first error is reported.
  std::vector<Attribute> kept;
  std::exception_ptr first_failure;
  for (auto a = removed.rbegin(); a != removed.rend(); ++a) {
    try {
      run_delete(comm, *a);
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
      kept.insert(kept.begin(), *a);  // back in the order they were set
    }
  }
  if (!first_failure) return;
  {
    std::lock_guard lock(comm->attributes_mu);
    comm->attributes.insert(comm->attributes.begin(), kept.begin(), kept.end());
  }
  std::rethrow_exception(first_failure);
}

int create_keyval(const char* function, MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                  MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval,
                  void* extra_state) {
  return guarded(MPI_COMM_WORLD, function, [&] {
    require_output(comm_keyval, "comm_keyval");
    auto key = std::make_shared<Keyval>();
    key->copy = comm_copy_attr_fn;
    key->destroy = comm_delete_attr_fn;
    key->extra_state = extra_state;
    std::lock_guard lock(g_keyvals.mu);
    key->id = g_keyvals.next++;
    g_keyvals.keys.emplace(key->id, key);
    *comm_keyval = key->id;
  });
}

int free_keyval(const char* function, int* comm_keyval) {
  return guarded(MPI_COMM_WORLD, function, [&] {
    require_output(comm_keyval, "comm_keyval");
    keyval_of(*comm_keyval);
    std::lock_guard lock(g_keyvals.mu);
    g_keyvals.keys.erase(*comm_keyval);  // attributes that use it keep their shared Keyval
    *comm_keyval = MPI_KEYVAL_INVALID;
  });
}

int set_attr(const char* function, MPI_Comm comm, int comm_keyval, void* attribute_val) {
  return guarded(comm, function, [&] {
    auto& h = comm_handle(comm);
    auto key = keyval_of(comm_keyval);
    // Replacing a value deletes the old one first, callback included (MPI 3.1 section 6.7.2).
    Attribute old;
    {
      std::lock_guard lock(h.attributes_mu);
      const auto it = find_attribute(h.attributes, comm_keyval);
      if (it == h.attributes.end()) {
        h.attributes.push_back({std::move(key), attribute_val});
        return;
      }
      old = *it;
    }
    run_delete(comm, old);
    std::lock_guard lock(h.attributes_mu);
    const auto it = find_attribute(h.attributes, comm_keyval);
    if (it == h.attributes.end()) {
      h.attributes.push_back({std::move(key), attribute_val});
    } else {
      it->value = attribute_val;
    }
  });
}

int get_attr(const char* function, MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag) {
  return guarded(comm, function, [&] {
    require_output(attribute_val, "attribute_val");
    require_output(flag, "flag");
    auto& h = comm_handle(comm);
    // A predefined attribute's value is a pointer to the int; a user attribute's is whatever
    // was set. Either is stored where attribute_val points (really a void**).
    const void* value = predefined_attribute(comm_keyval);
    if (value == nullptr) {
      keyval_of(comm_keyval);
      std::lock_guard lock(h.attributes_mu);
      const auto it = find_attribute(h.attributes, comm_keyval);
      if (it == h.attributes.end()) {
        *flag = 0;
        return;
      }
      value = it->value;
    }
    std::memcpy(attribute_val, &value, sizeof value);
    *flag = 1;
  });
}

int delete_attr(const char* function, MPI_Comm comm, int comm_keyval) {
  return guarded(comm, function, [&] {
    auto& h = comm_handle(comm);
    // Found by the attribute's own key, not the registry: a freed keyval still deletes what it
    // cached (MPI 3.1 section 6.7.2).
    std::optional<Attribute> removed;
    {
      std::lock_guard lock(h.attributes_mu);
      const auto it = find_attribute(h.attributes, comm_keyval);
      if (it != h.attributes.end()) {
        removed = *it;
        h.attributes.erase(it);
      }
    }
    if (!removed) {
      keyval_of(comm_keyval);  // an invalid or predefined key is an error
      return;                  // nothing cached under a valid key
    }
    try {
      run_delete(comm, *removed);
    } catch (...) {
      // A failed delete leaves the attribute cached, unless a new value was set meanwhile.
      std::lock_guard lock(h.attributes_mu);
      if (find_attribute(h.attributes, comm_keyval) == h.attributes.end()) {
        h.attributes.push_back(*removed);
      }
      throw;
    }
  });
}

}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int sempi_mpi_comm_null_copy_fn(MPI_Comm /*oldcomm*/, int /*comm_keyval*/, void* /*extra_state*/,
                                void* /*attribute_val_in*/, void* /*attribute_val_out*/,
                                int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

int sempi_mpi_comm_dup_fn(MPI_Comm /*oldcomm*/, int /*comm_keyval*/, void* /*extra_state*/,
                          void* attribute_val_in, void* attribute_val_out, int* flag) {
  std::memcpy(attribute_val_out, &attribute_val_in, sizeof attribute_val_in);  // a void**
  *flag = 1;
  return MPI_SUCCESS;
}

int sempi_mpi_comm_null_delete_fn(MPI_Comm /*comm*/, int /*comm_keyval*/, void* /*attribute_val*/,
                                  void* /*extra_state*/) {
  return MPI_SUCCESS;
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval,
                           void* extra_state) {
  return create_keyval("MPI_Comm_create_keyval", comm_copy_attr_fn, comm_delete_attr_fn,
                       comm_keyval, extra_state);
}

int MPI_Comm_free_keyval(int* comm_keyval) {
  return free_keyval("MPI_Comm_free_keyval", comm_keyval);
}

int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val) {
  return set_attr("MPI_Comm_set_attr", comm, comm_keyval, attribute_val);
}

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag) {
  return get_attr("MPI_Comm_get_attr", comm, comm_keyval, attribute_val, flag);
}

int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
  return delete_attr("MPI_Comm_delete_attr", comm, comm_keyval);
}

}  // extern "C"
