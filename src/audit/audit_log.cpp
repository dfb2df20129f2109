#include "audit/audit_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <new>

#include "common/diagnostics.hpp"
#include "common/hex.hpp"
#include "common/utf8.hpp"
#include "sempi/error.hpp"

namespace sempi::audit {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// Formatting into room reserved beforehand (see AuditLog::begin): each helper writes at `out`
// and returns the end of what it wrote.

// The longest JSON-escaped form of n bytes ("\u00XX" per byte).
constexpr std::size_t escaped_bound(std::size_t n) { return 6 * n; }

template <std::size_t N>
char* put(char* out, const char (&literal)[N]) {
  std::memcpy(out, literal, N - 1);
  return out + N - 1;
}

char* put(char* out, std::string_view text) {
  if (!text.empty()) std::memcpy(out, text.data(), text.size());  // data() may be null
  return out + text.size();
}

template <class T>
char* put_number(char* out, T value) {
  return std::to_chars(out, out + 24, value).ptr;  // 24 digits hold any 64-bit integer
}

char* put_hex(char* out, std::span<const std::uint8_t> bytes) {
  for (const auto b : bytes) {
    *out++ = kHexDigits[b >> 4];
    *out++ = kHexDigits[b & 0xf];
  }
  return out;
}

char* put_u_escape(char* out, unsigned code_unit) {
  out = put(out, "\\u");
  for (int shift = 12; shift >= 0; shift -= 4) *out++ = kHexDigits[(code_unit >> shift) & 0xf];
  return out;
}

// JSON string content exactly as nlohmann::json::dump(-1, ' ', true, replace) writes it (so a
// name reads the same in message and event records): printable ASCII as is except the
// escapes, every other character (DEL too) as \uXXXX (a surrogate pair above U+FFFF), and each
// ill-formed sequence as one U+FFFD, the byte that ended it read again.
char* put_json_escaped(char* out, std::string_view text) {
  std::size_t plain = 0;  // start of the run of characters that need no escaping
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    out = put(out, text.substr(plain, i - plain));
    if (u < 0x80) {
      switch (c) {
        case '"': out = put(out, "\\\""); break;
        case '\\': out = put(out, "\\\\"); break;
        case '\b': out = put(out, "\\b"); break;
        case '\f': out = put(out, "\\f"); break;
        case '\n': out = put(out, "\\n"); break;
        case '\r': out = put(out, "\\r"); break;
        case '\t': out = put(out, "\\t"); break;
        default: out = put_u_escape(out, u);
      }
      plain = ++i;
      continue;
    }
    std::size_t length = 0;
    const std::size_t valid = utf8_valid_prefix(text, i, length);
    if (valid < length) {
      out = put_u_escape(out, 0xfffd);
      i += std::max<std::size_t>(valid, 1);
    } else {
      std::uint32_t cp = length == 2 ? u & 0x1fu : length == 3 ? u & 0x0fu : u & 0x07u;
      for (std::size_t k = 1; k < length; ++k) {
        cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3fu);
      }
      if (cp > 0xffff) {
        cp -= 0x10000;
        out = put_u_escape(out, 0xd800 + (cp >> 10));
        out = put_u_escape(out, 0xdc00 + (cp & 0x3ff));
      } else {
        out = put_u_escape(out, cp);
      }
      i += length;
    }
    plain = i;
  }
  return put(out, text.substr(plain));
}

char* put_string(char* out, std::string_view text) {
  *out++ = '"';
  out = put_json_escaped(out, text);
  *out++ = '"';
  return out;
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
  const std::size_t start = out.size();
  out.resize(start + escaped_bound(text.size()));
  out.resize(static_cast<std::size_t>(put_json_escaped(out.data() + start, text) - out.data()));
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

nlohmann::ordered_json chain_head_json(const ChainHead& head) {
  nlohmann::ordered_json out = {{"seq", head.seq}, {"hash", head.hash}};
  if (!head.write_error.empty()) out["write_error"] = head.write_error;
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
  // begin() grows the buffer as records accumulate, up to flush_bytes and the record that
  // crosses it: a rank that audits no messages, or the launcher (which writes every record at
  // once), keeps a small one.
  buffer_.resize(std::min<std::size_t>(options_.flush_each ? 0 : options_.flush_bytes, 64 * 1024) +
                 4096);
  // The same in every record: formatted once.
  source_fields_ = "},\"sempi\":{\"job\":";
  append_string(source_fields_, options_.job);
  if (options_.rank) {
    source_fields_ += ",\"source\":\"rank\",\"rank\":";
    source_fields_ += std::to_string(*options_.rank);
  } else {
    source_fields_ += ",\"source\":\"launcher\"";
  }
}

AuditLog::~AuditLog() {
  if (!closed_) close();
}

// Fixed text of any record, numbers and hex digests: generously more than they can take.
constexpr std::size_t kRecordFixedBound = 768;

char* AuditLog::begin(const timespec& ts, std::string_view action, bool success,
                      std::string_view reason, std::size_t variable_bytes) {
  if (ts.tv_sec != ts_second_) {
    ts_second_ = ts.tv_sec;
    std::tm tm{};
    const std::time_t t = ts.tv_sec;
    ::gmtime_r(&t, &tm);
    char buf[32];
    if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm) != ts_prefix_.size()) {
      std::memcpy(buf, "0000-00-00T00:00:00", ts_prefix_.size());  // a year beyond 9999
    }
    std::memcpy(ts_prefix_.data(), buf, ts_prefix_.size());
  }
  line_start_ = buffered_;
  const std::size_t bound = kRecordFixedBound + source_fields_.size() +
                            escaped_bound(action.size() + reason.size()) + variable_bytes;
  if (buffered_ + bound > buffer_.size()) {
    buffer_.resize(std::max(2 * buffer_.size(), buffered_ + bound));
  }
  char* out = buffer_.data() + line_start_;
  out = put(out, "{\"@timestamp\":\"");
  out = put(out, std::string_view(ts_prefix_.data(), ts_prefix_.size()));
  *out++ = '.';
  long us = ts.tv_nsec / 1000;
  for (int i = 5; i >= 0; --i) {
    out[i] = static_cast<char>('0' + us % 10);
    us /= 10;
  }
  out += 6;
  out = put(out, "Z\",\"event\":{\"sequence\":");
  out = put_number(out, seq_ + 1);
  out = put(out, ",\"action\":");
  out = put_string(out, action);
  out = success ? put(out, ",\"outcome\":\"success\"") : put(out, ",\"outcome\":\"failure\"");
  if (!reason.empty()) {
    out = put(out, ",\"reason\":");
    out = put_string(out, reason);
  }
  return put(out, source_fields_);
}

void AuditLog::finish(char* out, std::chrono::steady_clock::time_point now,
                      const LineSigner* signer, char* signature) {
  out = put(out, ",\"prev\":\"");
  out = put(out, prev_);
  out = put(out, "\"}}");
  char* line = buffer_.data() + line_start_;
  const std::string_view text(line, static_cast<std::size_t>(out - line));
  if (signer != nullptr) {
    // Signed as written with zeros in place of the signature: the verifier restores that.
    const std::string hex = (*signer)(text);
    if (hex.size() != kSignatureHexDigits) {
      throw Error(ErrorClass::intern, "audit record signature of unexpected length");
    }
    std::memcpy(signature, hex.data(), hex.size());
  }
  const Sha256 digest = sha256(text);
  put_hex(prev_.data(), digest);
  *out++ = '\n';
  buffered_ = static_cast<std::size_t>(out - buffer_.data());
  ++seq_;
  if (line_start_ == 0) oldest_ = now;
  if (options_.flush_each || write_due(now)) write_buffer();
}

void AuditLog::event(std::string_view action, bool success, std::string_view reason,
                     const nlohmann::ordered_json& fields) {
  write_event(action, success, reason, fields, nullptr);
}

void AuditLog::signed_event(std::string_view action, const nlohmann::ordered_json& fields,
                            const LineSigner& signer) {
  write_event(action, true, {}, fields, &signer);
}

void AuditLog::write_event(std::string_view action, bool success, std::string_view reason,
                           const nlohmann::ordered_json& fields, const LineSigner* signer) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);  // vDSO: no system call
  std::lock_guard lock(mu_);
  if (closed_) {
    count_dropped();
    return;
  }
  render_queued(SIZE_MAX);  // the records captured before this one come first
  std::string extra;  // events are rare: formatting their fields may allocate
  if (fields.is_object()) {
    for (const auto& [key, value] : fields.items()) {
      extra.push_back(',');
      append_string(extra, key);
      extra.push_back(':');
      extra += value.dump(-1, ' ', true, nlohmann::ordered_json::error_handler_t::replace);
    }
  }
  std::size_t signature_at = 0;
  if (signer != nullptr) {  // zeros for now: finish() signs the line and writes them over
    extra += ",\"signature\":\"";
    signature_at = extra.size();
    extra.append(kSignatureHexDigits, '0');
    extra.push_back('"');
  }
  char* out = begin(now, action, success, reason, extra.size());
  char* signature = signer != nullptr ? out + signature_at : nullptr;
  finish(put(out, extra), std::chrono::steady_clock::now(), signer, signature);
}

void AuditLog::message(const MessageRecord& r) {
  if (options_.flush_each) {  // durability asked for: render and write this record now
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    std::lock_guard lock(mu_);
    if (closed_) {
      count_dropped();
      return;
    }
    render_queued(SIZE_MAX);
    render(r, now, std::chrono::steady_clock::now());
    return;
  }
  const auto capture = [&r](Captured& c) noexcept {
    // Read once the slot is ours: one thread's timestamps follow its records' order.
    ::clock_gettime(CLOCK_REALTIME, &c.time);
    c.record = r;
    c.has_digest = r.digest != nullptr;
    if (c.has_digest) c.digest = *r.digest;
    try {
      c.comm.assign(r.comm);  // reuses the slot's capacity
    } catch (const std::bad_alloc&) {
      // A claimed slot must be published. Keep the record with as much of the name as the
      // slot holds (assign left it unchanged, so this does not allocate).
      c.comm.assign(r.comm.substr(0, c.comm.capacity()));
    }
  };
  while (!captured_.try_push(capture)) {
    render_pending(SIZE_MAX);  // the renderer fell kMaxQueued records behind: the capturer pays
  }
}

void AuditLog::render_pending(std::size_t max) {
  std::lock_guard lock(mu_);
  render_queued(max);
}

void AuditLog::try_render_pending(std::size_t max) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (lock.owns_lock()) render_queued(max);
}

void AuditLog::count_dropped() {
  // Once: a rank that goes on after closing its chain may log much, and one line says it.
  if (dropped_++ == 0) {
    diagnostics().warn(
        "sempi: audit log {} is closed (its chain head is sealed): later records are "
        "not written",
        path_.string());
  }
}

void AuditLog::render_queued(std::size_t max) {
  std::optional<std::chrono::steady_clock::time_point> now;  // read once, for the buffer's age
  for (std::size_t done = 0; done < max; ++done) {
    Captured* c = captured_.front();
    if (c == nullptr) break;
    if (closed_) {
      count_dropped();
    } else {
      c->record.comm = c->comm;
      c->record.digest = c->has_digest ? &c->digest : nullptr;
      if (!now) now = std::chrono::steady_clock::now();
      render(c->record, c->time, *now);
    }
    captured_.pop();  // only now may a producer reuse the slot
  }
}

void AuditLog::render(const MessageRecord& r, const timespec& time,
                      std::chrono::steady_clock::time_point now) {
  const std::string_view op = r.op;
  const std::string_view direction = r.direction != nullptr ? r.direction : "";
  char* out = begin(time, r.action, r.success, r.reason != nullptr ? r.reason : "",
                    escaped_bound(r.comm.size()) + op.size() + direction.size());
  out = put(out, ",\"peer\":");
  out = put_number(out, r.peer);
  out = put(out, ",\"comm\":");
  out = put_string(out, r.comm);
  out = put(out, ",\"context\":");
  out = put_number(out, r.context);
  out = put(out, ",\"op\":\"");
  out = put(out, op);
  out = put(out, "\",\"tag\":");
  out = put_number(out, r.tag);
  out = put(out, ",\"bytes\":");
  out = put_number(out, r.bytes);
  out = put(out, ",\"msg\":");
  out = put_number(out, r.msg);
  if (r.direction != nullptr) {
    out = put(out, ",\"direction\":\"");
    out = put(out, direction);
    *out++ = '"';
  }
  if (r.dry_run) out = put(out, ",\"dry_run\":true");
  if (r.digest != nullptr) {
    out = put(out, ",\"sha256\":\"");
    out = put_hex(out, *r.digest);
    *out++ = '"';
  }
  finish(out, now);
}

bool AuditLog::write_due(std::chrono::steady_clock::time_point now) const {
  return buffered_ >= options_.flush_bytes || now - oldest_ >= options_.max_age;
}

void AuditLog::write_buffer() {
  std::size_t off = 0;
  while (off < buffered_ && write_error_.empty()) {
    const ssize_t n = ::write(fd_, buffer_.data() + off, buffered_ - off);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // The log is now incomplete. The chain goes on, and its head says why the file ends
      // early, so that `sempi audit verify` reports lost records, not removed ones. Say it once.
      write_error_ = n < 0 ? std::strerror(errno) : "write returned 0";
      diagnostics().error("sempi: cannot write audit log {}: {} (later records are lost)",
                          path_.string(), write_error_);
    }
  }
  buffered_ = 0;
}

void AuditLog::flush() {
  std::lock_guard lock(mu_);
  render_queued(SIZE_MAX);
  if (buffered_ > 0) write_buffer();
}

void AuditLog::flush_if_due() {
  std::lock_guard lock(mu_);
  render_queued(SIZE_MAX);
  if (buffered_ > 0 && write_due(std::chrono::steady_clock::now())) write_buffer();
}

ChainHead AuditLog::close() {
  std::lock_guard lock(mu_);
  if (!closed_) {
    render_queued(SIZE_MAX);
    closed_ = true;
    if (buffered_ > 0) write_buffer();
    // A failed sync (EIO) may have lost what write() accepted: the head says so too.
    if (::fsync(fd_) != 0 && errno != EINVAL && write_error_.empty()) {
      write_error_ = std::string("fsync: ") + std::strerror(errno);
      diagnostics().error("sempi: cannot sync audit log {}: {}", path_.string(), write_error_);
    }
    ::close(fd_);
    fd_ = -1;
  }
  return {seq_, prev_, write_error_};
}

ChainHead AuditLog::head() {
  std::lock_guard lock(mu_);
  render_queued(SIZE_MAX);
  return {seq_, prev_, write_error_};
}

}  // namespace sempi::audit
