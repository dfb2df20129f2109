#include "audit/audit_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

#include <spdlog/spdlog.h>

#include "common/hex.hpp"
#include "sempi/error.hpp"

namespace sempi::audit {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

template <class T>
void append_number(std::string& out, T value) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
}

void append_hex(std::string& out, std::span<const std::uint8_t> bytes) {
  for (const auto b : bytes) {
    out.push_back(kHexDigits[b >> 4]);
    out.push_back(kHexDigits[b & 0xf]);
  }
}

void append_string(std::string& out, std::string_view text) {
  out.push_back('"');
  append_json_escaped(out, text);
  out.push_back('"');
}

// Set when this thread's MdCtxHolder is destroyed. A thread's thread_local objects are
// destroyed before static objects and atexit handlers run, which may still log (a runtime
// finalized at exit): they hash without the reused context. Trivially destructible, so it
// stays readable until the thread ends.
thread_local bool t_holder_destroyed = false;

struct MdCtxHolder {
  pki::EvpMdCtxPtr ctx{EVP_MD_CTX_new()};
  bool initialised = false;
  MdCtxHolder() = default;
  MdCtxHolder(const MdCtxHolder&) = delete;
  MdCtxHolder& operator=(const MdCtxHolder&) = delete;
  ~MdCtxHolder() { t_holder_destroyed = true; }
};

}  // namespace

std::string rank_file_name(int rank) { return "rank-" + std::to_string(rank) + ".jsonl"; }

void append_json_escaped(std::string& out, std::string_view text) {
  std::size_t plain = 0;  // start of the run of characters that need no escaping
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x80 && c != '"' && c != '\\') continue;
    out.append(text.substr(plain, i - plain));
    plain = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        out += "\\u00";
        out.push_back(kHexDigits[u >> 4]);
        out.push_back(kHexDigits[u & 0xf]);
    }
  }
  out.append(text.substr(plain));
}

Sha256 sha256(std::span<const std::uint8_t> data) {
  // One context per thread, reused: hashing every record must not allocate. After the first
  // use, initialising with a null type keeps the digest already fetched (no provider lookup).
  Sha256 out{};
  unsigned int len = 0;
  if (t_holder_destroyed) {
    if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 ||
        len != out.size()) {
      throw Error(ErrorClass::intern, "SHA-256 failed");
    }
    return out;
  }
  thread_local MdCtxHolder holder;
  const bool started =
      holder.ctx &&
      EVP_DigestInit_ex2(holder.ctx.get(), holder.initialised ? nullptr : EVP_sha256(), nullptr) == 1;
  holder.initialised = holder.initialised || started;
  if (!started ||
      EVP_DigestUpdate(holder.ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(holder.ctx.get(), out.data(), &len) != 1 || len != out.size()) {
    throw Error(ErrorClass::intern, "SHA-256 failed");
  }
  return out;
}

Sha256 sha256(std::string_view text) {
  return sha256(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

std::unique_ptr<AuditLog> AuditLog::create(const std::filesystem::path& file, Options options) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                        0600);
  if (fd < 0) {
    const int err = errno;
    throw Error(ErrorClass::io, "cannot create audit log " + file.string() + ": " +
                                    std::strerror(err) +
                                    (err == EEXIST ? " (use a fresh --audit-dir for each job)" : ""));
  }
  // The umask may have narrowed 0600; it can never widen it, but be explicit.
  ::fchmod(fd, 0600);
  return std::unique_ptr<AuditLog>(new AuditLog(file, fd, std::move(options)));
}

AuditLog::AuditLog(std::filesystem::path path, int fd, Options options)
    : path_(std::move(path)), fd_(fd), options_(std::move(options)) {
  line_.reserve(1024);
  buffer_.reserve(options_.flush_bytes + 4096);
  // The same in every record: formatted once.
  source_fields_ = "},\"sempi\":{\"job\":";
  append_string(source_fields_, options_.job);
  if (options_.rank) {
    source_fields_ += ",\"source\":\"rank\",\"rank\":";
    append_number(source_fields_, *options_.rank);
  } else {
    source_fields_ += ",\"source\":\"launcher\"";
  }
}

AuditLog::~AuditLog() {
  if (!closed_) close();
}

void AuditLog::begin(const timespec& ts, std::string_view action, bool success,
                     std::string_view reason) {
  if (ts.tv_sec != ts_second_) {
    ts_second_ = ts.tv_sec;
    std::tm tm{};
    const std::time_t t = ts.tv_sec;
    ::gmtime_r(&t, &tm);
    char buf[32];
    const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    ts_prefix_.assign(buf, n);
  }
  line_.clear();
  line_ += "{\"@timestamp\":\"";
  line_ += ts_prefix_;
  line_.push_back('.');
  char micros[6];
  long us = ts.tv_nsec / 1000;
  for (int i = 5; i >= 0; --i) {
    micros[i] = static_cast<char>('0' + us % 10);
    us /= 10;
  }
  line_.append(micros, 6);
  line_ += "Z\",\"event\":{\"sequence\":";
  append_number(line_, seq_ + 1);
  line_ += ",\"action\":";
  append_string(line_, action);
  line_ += success ? ",\"outcome\":\"success\"" : ",\"outcome\":\"failure\"";
  if (!reason.empty()) {
    line_ += ",\"reason\":";
    append_string(line_, reason);
  }
  line_ += source_fields_;
}

void AuditLog::finish() {
  line_ += ",\"prev\":\"";
  line_ += prev_;
  line_ += "\"}}";
  const Sha256 digest = sha256(line_);
  prev_.clear();
  append_hex(prev_, digest);
  ++seq_;
  if (buffer_.empty()) oldest_ = std::chrono::steady_clock::now();
  buffer_ += line_;
  buffer_.push_back('\n');
  if (options_.flush_each || buffer_.size() >= options_.hard_limit) {
    write_buffer();
  } else if (buffer_.size() >= options_.flush_bytes ||
             std::chrono::steady_clock::now() - oldest_ >= options_.max_age) {
    write_buffer();
  }
}

void AuditLog::event(std::string_view action, bool success, std::string_view reason,
                     const nlohmann::ordered_json& fields) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);  // vDSO: no system call
  std::lock_guard lock(mu_);
  if (closed_) {
    ++dropped_;
    return;
  }
  render_queued(SIZE_MAX);  // the records captured before this one come first
  begin(now, action, success, reason);
  if (fields.is_object()) {
    for (const auto& [key, value] : fields.items()) {
      line_.push_back(',');
      append_string(line_, key);
      line_.push_back(':');
      line_ += value.dump(-1, ' ', true, nlohmann::ordered_json::error_handler_t::replace);
    }
  }
  finish();
}

void AuditLog::message(const MessageRecord& r) {
  if (options_.flush_each) {  // durability asked for: render and write this record now
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    std::lock_guard lock(mu_);
    if (closed_) {
      ++dropped_;
      return;
    }
    render_queued(SIZE_MAX);
    render(r, now);
    return;
  }
  std::size_t queued = 0;
  {
    std::lock_guard lock(queue_mu_);
    if (queue_used_ == queue_.size()) queue_.emplace_back();
    Captured& c = queue_[queue_used_++];
    ::clock_gettime(CLOCK_REALTIME, &c.time);  // under the lock: timestamps follow queue order
    c.record = r;
    c.comm.assign(r.comm);  // reuses the entry's capacity
    c.has_digest = r.digest != nullptr;
    if (c.has_digest) c.digest = *r.digest;
    queued = queued_.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  if (queued > kMaxQueued) render_pending(SIZE_MAX);  // bounded memory: the capturer pays
}

void AuditLog::render_pending(std::size_t max) {
  std::lock_guard lock(mu_);
  render_queued(max);
}

void AuditLog::try_render_pending(std::size_t max) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (lock.owns_lock()) render_queued(max);
}

void AuditLog::render_queued(std::size_t max) {
  std::size_t done = 0;
  while (done < max) {
    if (rendering_next_ == rendering_used_) {
      std::lock_guard lock(queue_mu_);
      if (queue_used_ == 0) break;
      std::swap(queue_, rendering_);
      rendering_used_ = queue_used_;
      rendering_next_ = 0;
      queue_used_ = 0;
    }
    Captured& c = rendering_[rendering_next_++];
    queued_.fetch_sub(1, std::memory_order_relaxed);
    ++done;
    if (closed_) {
      ++dropped_;
      continue;
    }
    c.record.comm = c.comm;
    c.record.digest = c.has_digest ? &c.digest : nullptr;
    render(c.record, c.time);
  }
}

void AuditLog::render(const MessageRecord& r, const timespec& time) {
  begin(time, r.action, r.success, r.reason != nullptr ? std::string_view(r.reason) : std::string_view());
  line_ += ",\"peer\":";
  append_number(line_, r.peer);
  line_ += ",\"comm\":";
  append_string(line_, r.comm);
  line_ += ",\"context\":";
  append_number(line_, r.context);
  line_ += ",\"op\":\"";
  line_ += r.op;
  line_ += "\",\"tag\":";
  append_number(line_, r.tag);
  line_ += ",\"bytes\":";
  append_number(line_, r.bytes);
  line_ += ",\"msg\":";
  append_number(line_, r.msg);
  if (r.direction != nullptr) {
    line_ += ",\"direction\":\"";
    line_ += r.direction;
    line_ += "\"";
  }
  if (r.dry_run) line_ += ",\"dry_run\":true";
  if (r.digest != nullptr) {
    line_ += ",\"sha256\":\"";
    append_hex(line_, *r.digest);
    line_ += "\"";
  }
  finish();
}

void AuditLog::write_buffer() {
  std::size_t off = 0;
  while (off < buffer_.size() && !write_failed_) {
    const ssize_t n = ::write(fd_, buffer_.data() + off, buffer_.size() - off);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // The log is now incomplete; `sempi audit verify` will report the gap. Say it once.
      write_failed_ = true;
      spdlog::error("sempi: cannot write audit log {}: {}", path_.string(),
                    n < 0 ? std::strerror(errno) : "short write");
    }
  }
  buffer_.clear();
}

void AuditLog::flush() {
  std::lock_guard lock(mu_);
  render_queued(SIZE_MAX);
  if (!buffer_.empty()) write_buffer();
}

void AuditLog::flush_if_due() {
  std::lock_guard lock(mu_);
  render_queued(SIZE_MAX);
  if (buffer_.empty()) return;
  if (buffer_.size() >= options_.flush_bytes ||
      std::chrono::steady_clock::now() - oldest_ >= options_.max_age) {
    write_buffer();
  }
}

ChainHead AuditLog::close() {
  std::lock_guard lock(mu_);
  if (!closed_) {
    render_queued(SIZE_MAX);
    closed_ = true;
    if (!buffer_.empty()) write_buffer();
    ::fsync(fd_);
    ::close(fd_);
    fd_ = -1;
  }
  return {seq_, prev_};
}

ChainHead AuditLog::head() {
  std::lock_guard lock(mu_);
  render_queued(SIZE_MAX);
  return {seq_, prev_};
}

}  // namespace sempi::audit
