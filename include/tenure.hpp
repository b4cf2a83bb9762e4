/*
 * tenure.hpp: a header-only C++17 wrapper over the C API of tenure (tenure.h).
 *
 * Link as for C: `c++ -std=c++17 app.cpp $(pkg-config --cflags --libs tenure)`, or with CMake
 * `find_package(tenure)` and `target_link_libraries(app PRIVATE tenure::tenure)`.
 *
 * - Namespace `tenurecpp`: `tenure` is already the C handle type, and C++ does not let a
 *   namespace share a name with a type.
 * - One move-only class per C handle type (engine, manual_clock, txn, watcher, session,
 *   lock_guard, leadership, observer, elector, fence_gate, keep_alive); its destructor releases
 *   the handle with the C function that does (tenure_free, tenure_lock_free…). `get()` gives
 *   the C pointer for calls this header does not wrap. Using a moved-from object throws
 *   (TENURE_ERR_NULL_POINTER), it never crashes.
 * - Every failure throws `tenurecpp::error`, carrying the tenure_result code and the library's
 *   message (which function, key, lease or path).
 * - Keys, values and prefixes are std::string_view (any bytes); names and paths too (a NUL
 *   inside one is TENURE_ERR_INVALID_ARGUMENT). Results are plain values (std::string,
 *   std::vector), copied out of the C objects, which are freed before the call returns.
 * - Every TTL, interval and timeout is a std::chrono::milliseconds (seconds convert
 *   implicitly); a timeout of `tenurecpp::forever` waits without limit, 0 only checks, and a
 *   wait that runs out throws TENURE_ERR_TIMEOUT.
 * - "None" is std::optional: a missing key, no leader, a key without lease, no deadline.
 * - Thread safety is the C API's (see tenure.h): engines, sessions, locks, leaderships,
 *   observers, electors, gates and keep-alives may be shared between threads; a txn is built
 *   by one thread at a time; destroying an object needs that no other thread still uses it.
 */

#ifndef TENURE_HPP
#define TENURE_HPP

#include <tenure.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tenurecpp {

using milliseconds = std::chrono::milliseconds;
using lease_id = std::int64_t;

// A timeout that waits without limit (the C API's -1).
inline constexpr milliseconds forever{-1};

// A failed call: the C result code and the library's message for it.
class error : public std::runtime_error {
  public:
    error(tenure_result code, const std::string &message, std::int64_t compact_revision = 0)
        : std::runtime_error(std::string(tenure_result_str(code)) + ": " + message),
          code_(code), compact_revision_(compact_revision) {}
    // The TENURE_ERR_* code.
    tenure_result code() const noexcept { return code_; }
    // The code's name, e.g. "TENURE_ERR_LEASE_NOT_FOUND".
    const char *name() const noexcept { return tenure_result_str(code_); }
    // TENURE_ERR_COMPACTED by a compaction: its revision, the oldest still kept; else 0
    // (tenure_last_error_compact_revision).
    std::int64_t compact_revision() const noexcept { return compact_revision_; }

  private:
    tenure_result code_;
    std::int64_t compact_revision_;
};

// The library's version, "MAJOR.MINOR.PATCH".
inline std::string_view version() { return tenure_version(); }

namespace detail {

// The message is per thread and valid until the next failure: copy it at once.
inline void check(tenure_result rc) {
    if (rc != TENURE_OK)
        throw error(rc, tenure_last_error_message(), tenure_last_error_compact_revision());
}

inline const std::uint8_t *bytes(std::string_view s) noexcept {
    return reinterpret_cast<const std::uint8_t *>(s.data());
}

inline std::string text(tenure_bytes b) {
    if (b.len == 0) return std::string();
    return std::string(reinterpret_cast<const char *>(b.data), b.len);
}

// The C API takes names and paths NUL-terminated: a NUL inside would cut them short unseen.
inline std::string c_string(std::string_view s, const char *what) {
    if (s.find('\0') != std::string_view::npos)
        throw error(TENURE_ERR_INVALID_ARGUMENT, std::string(what) + " contains a NUL byte");
    return std::string(s);
}

inline std::int64_t ms(milliseconds d) noexcept { return d.count(); }

// Owns one C object and releases it with `Free` (which takes NULL as a no-op).
template <typename T, void (*Free)(T *)>
class handle {
  public:
    handle() noexcept = default;
    explicit handle(T *p) noexcept : p_(p) {}
    handle(handle &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    handle &operator=(handle &&o) noexcept {
        if (this != &o) {
            reset();
            p_ = std::exchange(o.p_, nullptr);
        }
        return *this;
    }
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    ~handle() { reset(); }

    T *get() const noexcept { return p_; }
    T *release() noexcept { return std::exchange(p_, nullptr); }
    void reset() noexcept { Free(std::exchange(p_, nullptr)); }

  private:
    T *p_ = nullptr;
};

}  // namespace detail

// A key with its value and revisions.
struct key_value {
    std::string key;
    std::string value;
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    // Puts since creation, 1 after the first.
    std::int64_t version = 0;
    // The lease the key is attached to; none when it is not.
    std::optional<lease_id> lease;
};

// A lease's TTL, remaining time and attached keys (in key order).
struct lease_info {
    lease_id id = 0;
    milliseconds ttl{0};
    // None when the lease has no deadline (a standby engine).
    std::optional<milliseconds> remaining;
    std::vector<std::string> keys;
};

// A lease that reached its deadline, with the keys revoked with it (auto revoke) or that a
// revoke would delete (manual revoke).
struct expired_lease {
    lease_id id = 0;
    milliseconds ttl{0};
    std::vector<std::string> keys;
};

namespace detail {

inline key_value to_key_value(const tenure_kv *kv) {
    key_value out;
    out.key = text(tenure_kv_key(kv));
    out.value = text(tenure_kv_value(kv));
    out.create_revision = tenure_kv_create_revision(kv);
    out.mod_revision = tenure_kv_mod_revision(kv);
    out.version = tenure_kv_version(kv);
    if (const std::int64_t lease = tenure_kv_lease(kv); lease != 0) out.lease = lease;
    return out;
}

inline std::vector<key_value> to_key_values(const tenure_kv_list *list) {
    std::vector<key_value> out;
    const std::size_t n = tenure_kv_list_len(list);
    out.reserve(n);
    for (std::size_t i = 0; i < n; i++) out.push_back(to_key_value(tenure_kv_list_get(list, i)));
    return out;
}

inline lease_info to_lease_info(const tenure_lease_info *info) {
    lease_info out;
    out.id = tenure_lease_info_id(info);
    out.ttl = milliseconds(tenure_lease_info_ttl_ms(info));
    if (const std::int64_t left = tenure_lease_info_remaining_ms(info); left >= 0)
        out.remaining = milliseconds(left);
    const std::size_t n = tenure_lease_info_key_count(info);
    out.keys.reserve(n);
    for (std::size_t i = 0; i < n; i++) out.keys.push_back(text(tenure_lease_info_key(info, i)));
    return out;
}

// A C key-value from a call that returns NULL for "none", taken over and copied.
inline std::optional<key_value> take_key_value(tenure_kv *raw) {
    handle<tenure_kv, tenure_kv_free> kv(raw);
    if (!kv.get()) return std::nullopt;
    return to_key_value(kv.get());
}

}  // namespace detail

// A manual clock for deterministic tests: time moves only with advance().
class manual_clock {
  public:
    manual_clock() {
        tenure_clock *raw = nullptr;
        detail::check(tenure_clock_manual_new(&raw));
        h_ = decltype(h_)(raw);
    }
    // Moves monotonic and wall time forward; engines using the clock expire what is due.
    void advance(milliseconds d) const {
        detail::check(tenure_clock_advance(h_.get(), detail::ms(d)));
    }
    // Steps the wall time alone, either way (a wall-clock jump).
    void step_wall(milliseconds delta) const {
        detail::check(tenure_clock_step_wall(h_.get(), detail::ms(delta)));
    }
    tenure_clock *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_clock, tenure_clock_free> h_;
};

// Engine options, starting from the defaults of tenure_options_init.
class options {
  public:
    options() { detail::check(tenure_options_init(&raw_)); }

    // Every write on disk when the call returns (the default).
    options &immediate() {
        raw_.durability = TENURE_DURABILITY_IMMEDIATE;
        return *this;
    }
    // Writes acknowledged after the in-memory apply, committed at least every `flush_interval`.
    options &buffered(milliseconds flush_interval) {
        raw_.durability = TENURE_DURABILITY_BUFFERED;
        raw_.flush_interval_ms = detail::ms(flush_interval);
        return *this;
    }
    // Recovery from the persisted remaining TTLs and the wall time since (the default).
    options &recovery_wall() {
        raw_.recovery = TENURE_RECOVERY_WALL;
        return *this;
    }
    // etcd's recovery: every lease restarts from its remaining TTL plus `extend`.
    options &recovery_extend(milliseconds extend) {
        raw_.recovery = TENURE_RECOVERY_EXTEND;
        raw_.extend_ms = detail::ms(extend);
        return *this;
    }
    options &min_ttl(milliseconds d) {
        raw_.min_ttl_ms = detail::ms(d);
        return *this;
    }
    options &checkpoint_interval(milliseconds d) {
        raw_.checkpoint_interval_ms = detail::ms(d);
        return *this;
    }
    options &expired_retry_interval(milliseconds d) {
        raw_.expired_retry_interval_ms = detail::ms(d);
        return *this;
    }
    options &primary(bool on) {
        raw_.primary = on;
        return *this;
    }
    options &auto_revoke(bool on) {
        raw_.auto_revoke = on;
        return *this;
    }
    options &watch_history(std::size_t events) {
        raw_.watch_history = events;
        return *this;
    }
    options &watch_queue(std::size_t events) {
        raw_.watch_queue = events;
        return *this;
    }
    // The file's space quota (SPEC E20): a write that would reach it throws
    // TENURE_ERR_QUOTA_EXCEEDED and raises a NOSPACE alarm. 0 (the default): none.
    options &quota_backend_bytes(std::uint64_t bytes) {
        raw_.quota_backend_bytes = bytes;
        return *this;
    }
    // The member ID the engine raises its own alarms as (default 0).
    options &member_id(std::uint64_t id) {
        raw_.member_id = id;
        return *this;
    }
    // Borrowed until the engine is opened (the engine then keeps its own reference).
    options &clock(const manual_clock &c) {
        raw_.clock = c.get();
        return *this;
    }
    // Shared mode: several processes open one file (tenure_options.shared); engine::stats()
    // .owner says whether this process owns it.
    options &shared(bool on) {
        raw_.shared = on;
        return *this;
    }
    const tenure_options *get() const noexcept { return &raw_; }

  private:
    tenure_options raw_;
};

// Options of engine::connect; what is left unset takes the server's or library's default.
struct connect_options {
    // The deadline of every call, retries included; 0 = the default (5 s).
    milliseconds request_timeout{0};
    std::optional<std::string> ca_file;
    std::optional<std::string> cert_file;
    std::optional<std::string> key_file;
    std::optional<std::string> server_name;
    std::optional<std::string> user;
    std::optional<std::string> password;
};

// How a transaction compare relates the key's current field to the given one.
enum class compare_op : tenure_compare_op {
    equal = TENURE_COMPARE_EQUAL,
    greater = TENURE_COMPARE_GREATER,
    less = TENURE_COMPARE_LESS,
    not_equal = TENURE_COMPARE_NOT_EQUAL,
};

// A transaction being built: if every compare holds the success operations run, else the
// failure ones, atomically at one revision (engine::commit). Built by one thread at a time;
// it can be committed again.
class txn {
  public:
    // The operations of one branch; chain them: `t.success().put("k", "v").get("k");`.
    class branch {
      public:
        branch &put(std::string_view key, std::string_view value,
                    std::optional<lease_id> lease = std::nullopt) {
            detail::check(tenure_txn_put(t_, on_success_, detail::bytes(key), key.size(),
                                         detail::bytes(value), value.size(), lease.value_or(0)));
            return *this;
        }
        branch &get(std::string_view key) {
            detail::check(tenure_txn_get(t_, on_success_, detail::bytes(key), key.size()));
            return *this;
        }
        branch &erase(std::string_view key) {
            detail::check(tenure_txn_delete(t_, on_success_, detail::bytes(key), key.size()));
            return *this;
        }
        branch &erase_prefix(std::string_view prefix) {
            detail::check(
                tenure_txn_delete_prefix(t_, on_success_, detail::bytes(prefix), prefix.size()));
            return *this;
        }
        // At most `limit` keys starting with `prefix` (0 = no limit).
        branch &range(std::string_view prefix, std::size_t limit = 0) {
            detail::check(tenure_txn_range(t_, on_success_, detail::bytes(prefix), prefix.size(),
                                           limit));
            return *this;
        }

      private:
        friend class txn;
        branch(tenure_txn *t, bool on_success) noexcept : t_(t), on_success_(on_success) {}
        tenure_txn *t_;
        bool on_success_;
    };

    txn() {
        tenure_txn *raw = nullptr;
        detail::check(tenure_txn_new(&raw));
        h_ = decltype(h_)(raw);
    }

    // Compares of the key's value (byte-wise; a missing key never matches), version (0 for a
    // missing key: `equal 0` is "does not exist"), revisions and lease (0 for none).
    txn &compare_value(std::string_view key, compare_op op, std::string_view value) {
        detail::check(tenure_txn_compare_value(h_.get(), detail::bytes(key), key.size(),
                                               static_cast<tenure_compare_op>(op),
                                               detail::bytes(value), value.size()));
        return *this;
    }
    txn &compare_version(std::string_view key, compare_op op, std::int64_t version) {
        detail::check(tenure_txn_compare_version(h_.get(), detail::bytes(key), key.size(),
                                                 static_cast<tenure_compare_op>(op), version));
        return *this;
    }
    txn &compare_create_revision(std::string_view key, compare_op op, std::int64_t revision) {
        detail::check(tenure_txn_compare_create_revision(h_.get(), detail::bytes(key), key.size(),
                                                         static_cast<tenure_compare_op>(op),
                                                         revision));
        return *this;
    }
    txn &compare_mod_revision(std::string_view key, compare_op op, std::int64_t revision) {
        detail::check(tenure_txn_compare_mod_revision(h_.get(), detail::bytes(key), key.size(),
                                                      static_cast<tenure_compare_op>(op),
                                                      revision));
        return *this;
    }
    txn &compare_lease(std::string_view key, compare_op op, lease_id lease) {
        detail::check(tenure_txn_compare_lease(h_.get(), detail::bytes(key), key.size(),
                                               static_cast<tenure_compare_op>(op), lease));
        return *this;
    }

    branch success() noexcept { return branch(h_.get(), true); }
    branch failure() noexcept { return branch(h_.get(), false); }
    tenure_txn *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_txn, tenure_txn_free> h_;
};

// The kind of one transaction operation's result.
enum class op_type : tenure_op_type {
    put = TENURE_OP_PUT,
    get = TENURE_OP_GET,
    erase = TENURE_OP_DELETE,
    erase_prefix = TENURE_OP_DELETE_PREFIX,
    range = TENURE_OP_RANGE,
};

// One operation's result: `revision` for a put, `deleted` for the erases (0 or 1 for erase),
// `kvs` for get (zero or one) and range.
struct op_result {
    op_type type = op_type::put;
    std::int64_t revision = 0;
    std::uint64_t deleted = 0;
    std::vector<key_value> kvs;
};

// What a committed transaction did.
struct txn_response {
    // Every compare held: the success branch ran.
    bool succeeded = false;
    // The store revision after it (unchanged when it wrote nothing).
    std::int64_t revision = 0;
    // One per operation of the branch that ran.
    std::vector<op_result> results;
};

// What happened to a key.
enum class event_type : tenure_event_kind {
    put = TENURE_EVENT_PUT,
    erase = TENURE_EVENT_DELETE,
};

// One watch event. For an erase, `kv` holds the key, an empty value and the deleting revision.
struct event {
    event_type type = event_type::put;
    std::int64_t revision = 0;
    key_value kv;
    // The key-value before the change, when the watch asked for it and the key existed.
    std::optional<key_value> prev_kv;
};

struct watch_options {
    // Every key starting with the watched key (an empty prefix: every key).
    bool prefix = false;
    // Include the previous key-value in each event.
    bool prev_kv = false;
    // 0: from now on; positive: first replay the retained history from this revision.
    std::int64_t start_revision = 0;
};

// A watch; destroying it cancels it. Events arrive in revision order. It stays valid after
// its engine closes (next() then throws TENURE_ERR_CLOSED).
class watcher {
  public:
    explicit watcher(tenure_watcher *raw) noexcept : h_(raw) {}
    // The next event within `timeout`. Throws TENURE_ERR_TIMEOUT when none came,
    // TENURE_ERR_COMPACTED when the watcher fell too far behind, TENURE_ERR_CLOSED.
    event next(milliseconds timeout = forever) const {
        tenure_event *raw = nullptr;
        detail::check(tenure_watcher_next(h_.get(), detail::ms(timeout), &raw));
        detail::handle<tenure_event, tenure_event_free> ev(raw);
        event out;
        out.type = static_cast<event_type>(tenure_event_type(ev.get()));
        out.revision = tenure_event_revision(ev.get());
        out.kv = detail::to_key_value(tenure_event_kv(ev.get()));
        if (const tenure_kv *prev = tenure_event_prev_kv(ev.get()))
            out.prev_kv = detail::to_key_value(prev);
        return out;
    }
    tenure_watcher *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_watcher, tenure_watcher_free> h_;
};

// Renews one lease on a library thread every third of its TTL until destroyed (the lease is
// then left as it is) or until a renew fails.
class keep_alive {
  public:
    explicit keep_alive(tenure_keep_alive *raw) noexcept : h_(raw) {}
    bool is_alive() const noexcept { return tenure_keep_alive_is_alive(h_.get()); }
    // None while renewing; once a renew failed, that failure.
    std::optional<error> failure() const {
        const tenure_result rc = tenure_keep_alive_error(h_.get());
        if (rc == TENURE_OK) return std::nullopt;
        return error(rc, tenure_last_error_message());
    }
    tenure_keep_alive *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_keep_alive, tenure_keep_alive_free> h_;
};

// Follows the leadership of one election (engine::observe).
class observer {
  public:
    explicit observer(tenure_observer *raw) noexcept : h_(raw) {}
    // The next leadership state within `timeout`: the leader's key-value, or none for "no
    // leader". The first call gives the current state. Throws TENURE_ERR_TIMEOUT (also once
    // cancelled), TENURE_ERR_CLOSED.
    std::optional<key_value> next(milliseconds timeout = forever) const {
        tenure_kv *raw = nullptr;
        detail::check(tenure_observer_next(h_.get(), detail::ms(timeout), &raw));
        return detail::take_key_value(raw);
    }
    // Interrupts next() on any thread; sticky.
    void cancel() const { detail::check(tenure_observer_cancel(h_.get())); }
    tenure_observer *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_observer, tenure_observer_free> h_;
};

// Admits fencing tokens in non-decreasing order: put one in front of the resource a lock or
// leadership guards.
class fence_gate {
  public:
    fence_gate() {
        tenure_fence_gate *raw = nullptr;
        detail::check(tenure_fence_gate_new(&raw));
        h_ = decltype(h_)(raw);
    }
    // Throws TENURE_ERR_STALE_TOKEN for a token lower than the highest admitted.
    void admit(std::int64_t token) const {
        detail::check(tenure_fence_gate_admit(h_.get(), token));
    }
    // 0 before any token.
    std::int64_t highest() const noexcept { return tenure_fence_gate_highest(h_.get()); }
    tenure_fence_gate *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_fence_gate, tenure_fence_gate_free> h_;
};

class session;

// An engine handle: open (a file or in memory) or connected to an etcd v3 server. Destroying
// it releases this handle (tenure_free: the engine closes with its last handle); close()
// closes the engine for every handle.
class engine {
  public:
    // Opens (or creates) the database file at `path`.
    static engine open(std::string_view path, const options &opts = options()) {
        const std::string p = detail::c_string(path, "path");
        tenure *raw = nullptr;
        detail::check(tenure_open(p.c_str(), opts.get(), &raw));
        return engine(raw);
    }
    static engine in_memory(const options &opts = options()) {
        tenure *raw = nullptr;
        detail::check(tenure_open(nullptr, opts.get(), &raw));
        return engine(raw);
    }
    // `url`: http://HOST:PORT or https://HOST:PORT, several comma-separated, or unix:PATH.
    // Throws TENURE_ERR_UNSUPPORTED from a libtenure built without the network client.
    static engine connect(std::string_view url, const connect_options &opts = {}) {
        const std::string u = detail::c_string(url, "url");
        const std::optional<std::string> *given[6] = {&opts.ca_file,     &opts.cert_file,
                                                      &opts.key_file,    &opts.server_name,
                                                      &opts.user,        &opts.password};
        const char *names[6] = {"ca_file", "cert_file", "key_file",
                                "server_name", "user", "password"};
        std::string strings[6];  // own the C strings until the call returns
        const char *c_strings[6] = {};
        for (int i = 0; i < 6; i++) {
            if (!*given[i]) continue;
            strings[i] = detail::c_string(**given[i], names[i]);
            c_strings[i] = strings[i].c_str();
        }
        tenure_connect_options c{};
        c.request_timeout_ms = detail::ms(opts.request_timeout);
        c.ca_file = c_strings[0];
        c.cert_file = c_strings[1];
        c.key_file = c_strings[2];
        c.server_name = c_strings[3];
        c.user = c_strings[4];
        c.password = c_strings[5];
        tenure *raw = nullptr;
        detail::check(tenure_connect(u.c_str(), &c, &raw));
        return engine(raw);
    }

    explicit engine(tenure *raw) noexcept : h_(raw) {}

    // A second handle to the same engine, for another owner or thread.
    engine clone() const {
        tenure *raw = nullptr;
        detail::check(tenure_clone(h_.get(), &raw));
        return engine(raw);
    }
    // Closes the engine (every handle then gets TENURE_ERR_CLOSED) and releases this handle.
    void close() noexcept { tenure_close(h_.release()); }
    tenure_stats stats() const {
        tenure_stats out;
        detail::check(tenure_stats_read(h_.get(), &out));
        return out;
    }
    // The engine's figures in Prometheus' text format (SPEC L16). The C call refuses a buffer
    // too small (writing nothing) and reports the size needed; the text can grow between two
    // calls, so the buffer grows until the text fits.
    std::string metrics_prometheus() const {
        std::string buf(16 * 1024, '\0');
        for (;;) {
            std::size_t n = 0;
            const tenure_result rc =
                tenure_metrics_prometheus(h_.get(), buf.data(), buf.size(), &n);
            if (rc == TENURE_ERR_INVALID_ARGUMENT && n > buf.size() && n < (std::size_t{1} << 24)) {
                buf.resize(n + 1024);
                continue;
            }
            detail::check(rc);
            buf.resize(n);
            return buf;
        }
    }

    // Keys.
    std::int64_t put(std::string_view key, std::string_view value,
                     std::optional<lease_id> lease = std::nullopt) const {
        std::int64_t revision = 0;
        detail::check(tenure_put(h_.get(), detail::bytes(key), key.size(), detail::bytes(value),
                                 value.size(), lease.value_or(0), &revision));
        return revision;
    }
    std::optional<key_value> get(std::string_view key) const {
        tenure_kv *raw = nullptr;
        detail::check(tenure_get(h_.get(), detail::bytes(key), key.size(), &raw));
        return detail::take_key_value(raw);
    }
    // Whether the key existed.
    bool erase(std::string_view key) const {
        bool deleted = false;
        detail::check(tenure_delete(h_.get(), detail::bytes(key), key.size(), &deleted));
        return deleted;
    }
    // How many keys were deleted.
    std::uint64_t erase_prefix(std::string_view prefix) const {
        std::uint64_t count = 0;
        detail::check(
            tenure_delete_prefix(h_.get(), detail::bytes(prefix), prefix.size(), &count));
        return count;
    }
    // Keys starting with `prefix` in key order, at most `limit` (0 = no limit).
    std::vector<key_value> range(std::string_view prefix, std::size_t limit = 0) const {
        tenure_kv_list *raw = nullptr;
        detail::check(tenure_range(h_.get(), detail::bytes(prefix), prefix.size(), limit, &raw));
        detail::handle<tenure_kv_list, tenure_kv_list_free> list(raw);
        return detail::to_key_values(list.get());
    }
    // The key as it was at `revision` (0: the current one); throws for a compacted or future
    // revision (tenure_get_at).
    std::optional<key_value> get_at(std::string_view key, std::int64_t revision) const {
        tenure_kv *raw = nullptr;
        detail::check(tenure_get_at(h_.get(), detail::bytes(key), key.size(), revision, &raw));
        return detail::take_key_value(raw);
    }
    // `range` with options: a limit and a revision (0: the latest) (tenure_range_with).
    std::vector<key_value> range(std::string_view prefix, const tenure_range_options &opts) const {
        tenure_kv_list *raw = nullptr;
        detail::check(
            tenure_range_with(h_.get(), detail::bytes(prefix), prefix.size(), &opts, &raw));
        detail::handle<tenure_kv_list, tenure_kv_list_free> list(raw);
        return detail::to_key_values(list.get());
    }
    // `range` as it was at `revision` (0: the current one).
    std::vector<key_value> range_at(std::string_view prefix, std::size_t limit,
                                    std::int64_t revision) const {
        tenure_range_options opts{};
        opts.limit = limit;
        opts.revision = revision;
        return range(prefix, opts);
    }
    // etcd's Compact: drops the history below `revision`, which stays readable; `physical`:
    // returns once the freed rows are removed from the file.
    void compact(std::int64_t revision, bool physical = false) const {
        detail::check(tenure_compact(h_.get(), revision, physical));
    }
    std::int64_t revision() const {
        std::int64_t out = 0;
        detail::check(tenure_revision(h_.get(), &out));
        return out;
    }
    txn_response commit(const txn &t) const {
        tenure_txn_response *raw = nullptr;
        detail::check(tenure_txn_commit(h_.get(), t.get(), &raw));
        detail::handle<tenure_txn_response, tenure_txn_response_free> r(raw);
        txn_response out;
        out.succeeded = tenure_txn_response_succeeded(r.get());
        out.revision = tenure_txn_response_revision(r.get());
        const std::size_t n = tenure_txn_response_len(r.get());
        out.results.reserve(n);
        for (std::size_t i = 0; i < n; i++) {
            op_result op;
            op.type = static_cast<op_type>(tenure_txn_response_op_type(r.get(), i));
            op.revision = tenure_txn_response_op_revision(r.get(), i);
            op.deleted = tenure_txn_response_op_deleted(r.get(), i);
            op.kvs = detail::to_key_values(tenure_txn_response_op_kvs(r.get(), i));
            out.results.push_back(std::move(op));
        }
        return out;
    }
    watcher watch(std::string_view key, const watch_options &opts = {}) const {
        const std::uint32_t flags = (opts.prefix ? TENURE_WATCH_PREFIX : 0u) |
                                    (opts.prev_kv ? TENURE_WATCH_PREV_KV : 0u);
        tenure_watcher *raw = nullptr;
        detail::check(tenure_watch(h_.get(), detail::bytes(key), key.size(), flags,
                                   opts.start_revision, &raw));
        return watcher(raw);
    }

    // Leases. `id` 0 allocates a fresh ID.
    lease_id grant(milliseconds ttl, lease_id id = 0) const {
        lease_id out = 0;
        detail::check(tenure_lease_grant(h_.get(), detail::ms(ttl), id, &out));
        return out;
    }
    void revoke(lease_id id) const { detail::check(tenure_lease_revoke(h_.get(), id)); }
    // The granted TTL.
    milliseconds renew(lease_id id) const {
        std::int64_t ttl = 0;
        detail::check(tenure_lease_renew(h_.get(), id, &ttl));
        return milliseconds(ttl);
    }
    lease_info time_to_live(lease_id id) const {
        tenure_lease_info *raw = nullptr;
        detail::check(tenure_lease_time_to_live(h_.get(), id, &raw));
        detail::handle<tenure_lease_info, tenure_lease_info_free> info(raw);
        return detail::to_lease_info(info.get());
    }
    void attach(lease_id id, std::string_view key) const {
        detail::check(tenure_lease_attach(h_.get(), id, detail::bytes(key), key.size()));
    }
    void detach(lease_id id, std::string_view key) const {
        detail::check(tenure_lease_detach(h_.get(), id, detail::bytes(key), key.size()));
    }
    std::optional<lease_id> lease_of(std::string_view key) const {
        lease_id out = 0;
        detail::check(tenure_lease_of(h_.get(), detail::bytes(key), key.size(), &out));
        if (out == 0) return std::nullopt;
        return out;
    }
    void checkpoint(lease_id id, milliseconds remaining) const {
        detail::check(tenure_lease_checkpoint(h_.get(), id, detail::ms(remaining)));
    }
    // Every live lease, in ascending order of remaining time.
    std::vector<lease_info> leases() const {
        tenure_lease_list *raw = nullptr;
        detail::check(tenure_leases(h_.get(), &raw));
        detail::handle<tenure_lease_list, tenure_lease_list_free> list(raw);
        std::vector<lease_info> out;
        const std::size_t n = tenure_lease_list_len(list.get());
        out.reserve(n);
        for (std::size_t i = 0; i < n; i++)
            out.push_back(detail::to_lease_info(tenure_lease_list_get(list.get(), i)));
        return out;
    }
    // The next batch of expired leases within `timeout` (shared by every handle of the engine).
    std::vector<expired_lease> next_expired(milliseconds timeout = forever) const {
        tenure_expired *raw = nullptr;
        detail::check(tenure_expired_next(h_.get(), detail::ms(timeout), &raw));
        detail::handle<tenure_expired, tenure_expired_free> batch(raw);
        std::vector<expired_lease> out;
        const std::size_t n = tenure_expired_len(batch.get());
        out.reserve(n);
        for (std::size_t i = 0; i < n; i++) {
            expired_lease e;
            e.id = tenure_expired_id(batch.get(), i);
            e.ttl = milliseconds(tenure_expired_ttl_ms(batch.get(), i));
            const std::size_t keys = tenure_expired_key_count(batch.get(), i);
            e.keys.reserve(keys);
            for (std::size_t k = 0; k < keys; k++)
                e.keys.push_back(detail::text(tenure_expired_key(batch.get(), i, k)));
            out.push_back(std::move(e));
        }
        return out;
    }
    void promote(milliseconds extend = milliseconds(0)) const {
        detail::check(tenure_promote(h_.get(), detail::ms(extend)));
    }
    void demote() const { detail::check(tenure_demote(h_.get())); }
    bool is_primary() const {
        bool out = false;
        detail::check(tenure_is_primary(h_.get(), &out));
        return out;
    }
    keep_alive start_keep_alive(lease_id id) const {
        tenure_keep_alive *raw = nullptr;
        detail::check(tenure_keep_alive_start(h_.get(), id, &raw));
        return keep_alive(raw);
    }

    // Record locks (`SET key owner NX PX ttl`): the fencing token, or TENURE_ERR_LOCKED.
    std::int64_t try_acquire_record_lock(std::string_view key, std::string_view owner,
                                         milliseconds ttl) const {
        std::int64_t token = 0;
        detail::check(tenure_record_lock_try_acquire(h_.get(), detail::bytes(key), key.size(),
                                                     detail::bytes(owner), owner.size(),
                                                     detail::ms(ttl), &token));
        return token;
    }
    void refresh_record_lock(std::string_view key, std::string_view owner) const {
        detail::check(tenure_record_lock_refresh(h_.get(), detail::bytes(key), key.size(),
                                                 detail::bytes(owner), owner.size()));
    }
    void release_record_lock(std::string_view key, std::string_view owner) const {
        detail::check(tenure_record_lock_release(h_.get(), detail::bytes(key), key.size(),
                                                 detail::bytes(owner), owner.size()));
    }

    // Elections: the current leader of `name` (none when there is none), or an observer.
    std::optional<key_value> election_leader(std::string_view name) const {
        const std::string n = detail::c_string(name, "election name");
        tenure_kv *raw = nullptr;
        detail::check(tenure_election_leader(h_.get(), n.c_str(), &raw));
        return detail::take_key_value(raw);
    }
    observer observe(std::string_view name) const {
        const std::string n = detail::c_string(name, "election name");
        tenure_observer *raw = nullptr;
        detail::check(tenure_election_observe(h_.get(), n.c_str(), &raw));
        return observer(raw);
    }

    // A consistent copy of the database at `path` (see tenure_snapshot). `progress(done,
    // total)` runs on this thread and must not throw (std::terminate).
    using snapshot_progress = std::function<void(std::uint64_t done, std::uint64_t total)>;
    tenure_snapshot_info snapshot(std::string_view path, snapshot_progress progress = {}) const {
        const std::string p = detail::c_string(path, "path");
        tenure_snapshot_info out{};
        tenure_snapshot_progress_fn fn = nullptr;
        if (progress) {
            fn = [](void *user, std::uint64_t done, std::uint64_t total) noexcept {
                (*static_cast<snapshot_progress *>(user))(done, total);
            };
        }
        detail::check(tenure_snapshot(h_.get(), p.c_str(), fn, &progress, &out));
        return out;
    }

    // Alarms and the space quota (SPEC E20, E25). The raised alarms, in (kind, member) order;
    // the C call refuses an array too small (writing nothing) and reports the count needed,
    // which can grow between two calls, so the array grows until they fit.
    std::vector<tenure_alarm> alarms() const {
        std::vector<tenure_alarm> buf(4);
        for (;;) {
            std::size_t n = 0;
            const tenure_result rc = tenure_alarms(h_.get(), buf.data(), buf.size(), &n);
            if (rc == TENURE_ERR_INVALID_ARGUMENT && n > buf.size()) {
                buf.resize(n + 4);
                continue;
            }
            detail::check(rc);
            buf.resize(n);
            return buf;
        }
    }
    // Raises `alarm` (etcd's Alarm ACTIVATE); false if it was raised already.
    bool raise_alarm(tenure_alarm alarm) const {
        bool changed = false;
        detail::check(tenure_alarm_raise(h_.get(), alarm, &changed));
        return changed;
    }
    // Disarms `alarm` (etcd's Alarm DEACTIVATE); false if it was not raised.
    bool disarm_alarm(tenure_alarm alarm) const {
        bool changed = false;
        detail::check(tenure_alarm_disarm(h_.get(), alarm, &changed));
        return changed;
    }
    std::uint64_t member_id() const {
        std::uint64_t out = 0;
        detail::check(tenure_member_id(h_.get(), &out));
        return out;
    }
    // 0: no quota.
    std::uint64_t quota_backend_bytes() const {
        std::uint64_t out = 0;
        detail::check(tenure_quota_backend_bytes(h_.get(), &out));
        return out;
    }
    tenure_storage_size storage_size() const {
        tenure_storage_size out{};
        detail::check(tenure_storage_size_read(h_.get(), &out));
        return out;
    }
    // Gives the file's free pages back; the new size.
    tenure_storage_size defragment() const {
        tenure_storage_size out{};
        detail::check(tenure_defragment(h_.get(), &out));
        return out;
    }

    tenure *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure, tenure_free> h_;
};

// A held mutex (session::lock). Destroying it unlocks if still held.
class lock_guard {
  public:
    explicit lock_guard(tenure_lock *raw) noexcept : h_(raw) {}
    // Strictly increasing per mutex name; still readable after unlock.
    std::int64_t fencing_token() const noexcept { return tenure_lock_fencing_token(h_.get()); }
    // False once unlocked or lost with the session's lease.
    bool is_held() const noexcept { return tenure_lock_is_held(h_.get()); }
    // Throws TENURE_ERR_NOT_LEADER when no longer held.
    void unlock() const { detail::check(tenure_lock_unlock(h_.get())); }
    tenure_lock *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_lock, tenure_lock_free> h_;
};

// A held permit of a semaphore (session::acquire, SPEC S7). Destroying it releases it if
// still held.
class permit_guard {
  public:
    explicit permit_guard(tenure_permit *raw) noexcept : h_(raw) {}
    // The permit key's create revision; still readable after release.
    std::int64_t fencing_token() const noexcept { return tenure_permit_fencing_token(h_.get()); }
    // False once released or lost with the session's lease.
    bool is_held() const noexcept { return tenure_permit_is_held(h_.get()); }
    // Throws TENURE_ERR_NOT_LEADER when no longer held.
    void release() const { detail::check(tenure_permit_release(h_.get())); }
    tenure_permit *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_permit, tenure_permit_free> h_;
};

// A held read or write lock (session::rw_lock, SPEC S8). Destroying it
// releases it if still held.
class rw_guard {
  public:
    explicit rw_guard(tenure_rwhold *raw) noexcept : h_(raw) {}
    std::int64_t fencing_token() const noexcept { return tenure_rwhold_fencing_token(h_.get()); }
    bool is_write() const noexcept { return tenure_rwhold_is_write(h_.get()); }
    // False once released or lost with the session's lease.
    bool is_held() const noexcept { return tenure_rwhold_is_held(h_.get()); }
    // Throws TENURE_ERR_NOT_LEADER when no longer held.
    void release() const { detail::check(tenure_rwhold_release(h_.get())); }
    tenure_rwhold *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_rwhold, tenure_rwhold_free> h_;
};

// Leadership won by session::campaign. Destroying it does not resign (the candidacy ends with
// resign() or the session's lease).
class leadership {
  public:
    explicit leadership(tenure_leadership *raw) noexcept : h_(raw) {}
    // The leader key's create revision, strictly increasing per election.
    std::int64_t fencing_token() const noexcept {
        return tenure_leadership_fencing_token(h_.get());
    }
    bool is_held() const noexcept { return tenure_leadership_is_held(h_.get()); }
    // The leader key (`name/<lease hex>`).
    std::string key() const { return detail::text(tenure_leadership_key(h_.get())); }
    // Throws TENURE_ERR_NOT_LEADER once resigned or lost.
    void proclaim(std::string_view value) const {
        detail::check(tenure_leadership_proclaim(h_.get(), detail::bytes(value), value.size()));
    }
    void resign() const { detail::check(tenure_leadership_resign(h_.get())); }
    tenure_leadership *get() const noexcept { return h_.get(); }

  private:
    detail::handle<tenure_leadership, tenure_leadership_free> h_;
};

struct session_options {
    // The lease's TTL (ignored on resume: the lease keeps its own).
    milliseconds ttl{60000};
    // How often the lease is renewed; 0 = every third of the TTL.
    milliseconds keepalive_interval{0};
};

// Bounded holds of a mutex (SPEC S9); zero = none.
struct mutex_options {
    // After the hold ahead ended involuntarily (lease lost, or its max_hold ran out), take the
    // lock only this long after seeing that end. A voluntary unlock never delays.
    milliseconds lock_delay{0};
    // A hold ends itself this long after it was taken, even while the session lives.
    milliseconds max_hold{0};
};

// A lease renewed by a library thread until closed, orphaned or lost. Destroying it orphans
// the lease (it expires after its TTL, like a crash); close() revokes it at once, releasing
// its locks and candidacies.
class session {
  public:
    session(const engine &db, milliseconds ttl) {
        tenure_session *raw = nullptr;
        detail::check(tenure_session_new(db.get(), detail::ms(ttl), &raw));
        h_ = decltype(h_)(raw);
    }
    session(const engine &db, const session_options &opts) {
        const tenure_session_options c = to_c(opts);
        tenure_session *raw = nullptr;
        detail::check(tenure_session_new_with(db.get(), &c, &raw));
        h_ = decltype(h_)(raw);
    }
    // Takes over an existing lease (e.g. after a restart) and renews it every third of its TTL.
    static session resume(const engine &db, lease_id lease) {
        tenure_session *raw = nullptr;
        detail::check(tenure_session_resume(db.get(), lease, &raw));
        return session(raw);
    }
    // The same, renewing every `opts.keepalive_interval` (`opts.ttl` is ignored).
    static session resume(const engine &db, lease_id lease, const session_options &opts) {
        const tenure_session_options c = to_c(opts);
        tenure_session *raw = nullptr;
        detail::check(tenure_session_resume_with(db.get(), lease, &c, &raw));
        return session(raw);
    }
    explicit session(tenure_session *raw) noexcept : h_(raw) {}

    lease_id lease() const noexcept { return tenure_session_lease(h_.get()); }
    // Whether the lease is lost.
    bool done() const noexcept { return tenure_session_done(h_.get()); }
    // Waits until the lease is lost; throws TENURE_ERR_TIMEOUT (also once cancelled).
    void wait_done(milliseconds timeout = forever) const {
        detail::check(tenure_session_wait_done(h_.get(), detail::ms(timeout)));
    }
    // Interrupts this session's waits from any thread (they throw TENURE_ERR_TIMEOUT); sticky.
    void cancel() const { detail::check(tenure_session_cancel(h_.get())); }
    // Stops renewing, keeps the lease (resume() may take it over).
    void orphan() const { detail::check(tenure_session_orphan(h_.get())); }
    // Stops renewing and revokes the lease; waits through the session throw
    // TENURE_ERR_SESSION_EXPIRED.
    void close() const { detail::check(tenure_session_close(h_.get())); }

    // Waits (FIFO) until the session holds mutex `name`; throws TENURE_ERR_TIMEOUT.
    lock_guard lock(std::string_view name, milliseconds timeout = forever) const {
        const std::string n = detail::c_string(name, "mutex name");
        tenure_lock *raw = nullptr;
        detail::check(tenure_mutex_lock(h_.get(), n.c_str(), detail::ms(timeout), &raw));
        return lock_guard(raw);
    }
    // Never blocks: throws TENURE_ERR_LOCKED when another session holds or awaits it.
    lock_guard try_lock(std::string_view name) const {
        const std::string n = detail::c_string(name, "mutex name");
        tenure_lock *raw = nullptr;
        detail::check(tenure_mutex_try_lock(h_.get(), n.c_str(), &raw));
        return lock_guard(raw);
    }
    // lock() with bounded holds (SPEC S9).
    lock_guard lock(std::string_view name, const mutex_options &opts,
                    milliseconds timeout = forever) const {
        const std::string n = detail::c_string(name, "mutex name");
        const tenure_mutex_options c = to_c(opts);
        tenure_lock *raw = nullptr;
        detail::check(
            tenure_mutex_lock_with(h_.get(), n.c_str(), detail::ms(timeout), &c, &raw));
        return lock_guard(raw);
    }
    // try_lock() with bounded holds (SPEC S9).
    lock_guard try_lock(std::string_view name, const mutex_options &opts) const {
        const std::string n = detail::c_string(name, "mutex name");
        const tenure_mutex_options c = to_c(opts);
        tenure_lock *raw = nullptr;
        detail::check(tenure_mutex_try_lock_with(h_.get(), n.c_str(), &c, &raw));
        return lock_guard(raw);
    }
    // Waits (FIFO) until the session holds one of the `permits` permits of semaphore `name`;
    // throws TENURE_ERR_TIMEOUT, or TENURE_ERR_INVALID_ARGUMENT if `permits` is not the holders'.
    permit_guard acquire(std::string_view name, std::uint32_t permits,
                         milliseconds timeout = forever) const {
        const std::string n = detail::c_string(name, "semaphore name");
        tenure_permit *raw = nullptr;
        detail::check(
            tenure_semaphore_acquire(h_.get(), n.c_str(), permits, detail::ms(timeout), &raw));
        return permit_guard(raw);
    }
    // Never blocks: throws TENURE_ERR_LOCKED when every permit is taken or others wait.
    permit_guard try_acquire(std::string_view name, std::uint32_t permits) const {
        const std::string n = detail::c_string(name, "semaphore name");
        tenure_permit *raw = nullptr;
        detail::check(tenure_semaphore_try_acquire(h_.get(), n.c_str(), permits, &raw));
        return permit_guard(raw);
    }
    // Waits (FIFO) until the session holds read-write lock `name` for reading (`write`
    // false) or writing; throws TENURE_ERR_TIMEOUT.
    rw_guard rw_lock(std::string_view name, bool write, milliseconds timeout = forever) const {
        const std::string n = detail::c_string(name, "read-write lock name");
        tenure_rwhold *raw = nullptr;
        detail::check(tenure_rwlock_lock(h_.get(), n.c_str(), write, detail::ms(timeout), &raw));
        return rw_guard(raw);
    }
    // Never blocks: throws TENURE_ERR_LOCKED when a writer (or, to write, anyone) is before it.
    rw_guard try_rw_lock(std::string_view name, bool write) const {
        const std::string n = detail::c_string(name, "read-write lock name");
        tenure_rwhold *raw = nullptr;
        detail::check(tenure_rwlock_try_lock(h_.get(), n.c_str(), write, &raw));
        return rw_guard(raw);
    }
    // Campaigns in election `name` with `value` until leader; throws TENURE_ERR_TIMEOUT.
    leadership campaign(std::string_view name, std::string_view value,
                        milliseconds timeout = forever) const {
        const std::string n = detail::c_string(name, "election name");
        tenure_leadership *raw = nullptr;
        detail::check(tenure_election_campaign(h_.get(), n.c_str(), detail::bytes(value),
                                               value.size(), detail::ms(timeout), &raw));
        return leadership(raw);
    }
    tenure_session *get() const noexcept { return h_.get(); }

  private:
    static tenure_mutex_options to_c(const mutex_options &o) {
        tenure_mutex_options c;
        detail::check(tenure_mutex_options_init(&c));
        c.lock_delay_ms = detail::ms(o.lock_delay);
        c.max_hold_ms = detail::ms(o.max_hold);
        return c;
    }
    static tenure_session_options to_c(const session_options &o) {
        tenure_session_options c;
        detail::check(tenure_session_options_init(&c));
        c.ttl_ms = detail::ms(o.ttl);
        c.keepalive_interval_ms = detail::ms(o.keepalive_interval);
        return c;
    }
    detail::handle<tenure_session, tenure_session_free> h_;
};

// A leader elector (client-go style) on one record key.
struct elector_config {
    std::string name;
    std::string identity;
    // How long others wait after the leader stops renewing.
    milliseconds lease_duration{15000};
    // The leader steps down if it could not renew for this long.
    milliseconds renew_deadline{10000};
    // How often to try to acquire or renew.
    milliseconds retry_period{2000};
    // On stop, revoke the leader's lease so another candidate can lead at once.
    bool release_on_cancel = false;
};

// Called one at a time, in order, on a library thread; any may be empty. They must not throw
// (std::terminate) nor stop or destroy their own elector.
struct elector_callbacks {
    std::function<void(std::int64_t fencing_token)> on_started_leading;
    std::function<void()> on_stopped_leading;
    std::function<void(std::string_view identity)> on_new_leader;
};

// A running leader elector. Destroying it stops it: every callback has returned before the
// callbacks are destroyed.
class elector {
  public:
    elector(const engine &db, const elector_config &cfg, elector_callbacks cb)
        : cb_(std::make_unique<elector_callbacks>(std::move(cb))) {
        const std::string name = detail::c_string(cfg.name, "elector name");
        const std::string identity = detail::c_string(cfg.identity, "elector identity");
        tenure_elector_config c;
        detail::check(tenure_elector_config_init(&c));
        c.name = name.c_str();
        c.identity = identity.c_str();
        c.lease_duration_ms = detail::ms(cfg.lease_duration);
        c.renew_deadline_ms = detail::ms(cfg.renew_deadline);
        c.retry_period_ms = detail::ms(cfg.retry_period);
        c.release_on_cancel = cfg.release_on_cancel;
        tenure_elector_callbacks fns{nullptr, nullptr, nullptr};
        if (cb_->on_started_leading)
            fns.on_started_leading = [](void *u, std::int64_t token) noexcept {
                static_cast<elector_callbacks *>(u)->on_started_leading(token);
            };
        if (cb_->on_stopped_leading)
            fns.on_stopped_leading = [](void *u) noexcept {
                static_cast<elector_callbacks *>(u)->on_stopped_leading();
            };
        if (cb_->on_new_leader)
            fns.on_new_leader = [](void *u, const char *who) noexcept {
                static_cast<elector_callbacks *>(u)->on_new_leader(who);
            };
        tenure_elector *raw = nullptr;
        detail::check(tenure_elector_start(db.get(), &c, &fns, cb_.get(), &raw));
        h_ = decltype(h_)(raw);
    }
    elector(elector &&) noexcept = default;
    // Stops the old elector before its callbacks go.
    elector &operator=(elector &&o) noexcept {
        h_ = std::move(o.h_);
        cb_ = std::move(o.cb_);
        return *this;
    }

    bool is_leader() const noexcept { return tenure_elector_is_leader(h_.get()); }
    // The identity of the leader observed last; none before any.
    std::optional<std::string> leader() const {
        char *raw = nullptr;
        detail::check(tenure_elector_leader(h_.get(), &raw));
        if (!raw) return std::nullopt;
        const std::unique_ptr<char, void (*)(char *)> s(raw, tenure_string_free);
        return std::string(s.get());
    }
    // Steps down and waits for every callback; throws what ended it (e.g. TENURE_ERR_CLOSED).
    void stop() const { detail::check(tenure_elector_stop(h_.get())); }
    tenure_elector *get() const noexcept { return h_.get(); }

  private:
    // Declared first, destroyed last: the elector (stopped by its handle) uses it until then.
    std::unique_ptr<elector_callbacks> cb_;
    detail::handle<tenure_elector, tenure_elector_free> h_;
};

// ---- queues (S10), barriers (S11), groups and the partitioner (S12) ----------

// A FIFO queue (`priority == false`) or a priority queue, in etcd's contrib/recipes layouts.
class queue {
  public:
    queue(const engine &db, std::string_view name, bool priority = false) {
        const std::string n = detail::c_string(name, "queue name");
        tenure_queue *raw = nullptr;
        detail::check(priority ? tenure_priority_queue_new(db.get(), n.c_str(), &raw)
                               : tenure_queue_new(db.get(), n.c_str(), &raw));
        h_ = decltype(h_)(raw);
    }
    void enqueue(std::string_view value) const {
        detail::check(tenure_queue_enqueue(h_.get(), detail::bytes(value), value.size()));
    }
    void enqueue(std::string_view value, std::uint16_t priority) const {
        detail::check(tenure_queue_enqueue_priority(h_.get(), detail::bytes(value),
                                                    value.size(), priority));
    }
    // The first item within `timeout`; throws TENURE_ERR_TIMEOUT (also once cancelled).
    std::string dequeue(milliseconds timeout = forever) const {
        tenure_item *raw = nullptr;
        detail::check(tenure_queue_dequeue(h_.get(), detail::ms(timeout), &raw));
        detail::handle<tenure_item, tenure_item_free> it(raw);
        return detail::text(tenure_item_value(it.get()));
    }
    std::optional<std::string> try_dequeue() const {
        tenure_item *raw = nullptr;
        detail::check(tenure_queue_try_dequeue(h_.get(), &raw));
        if (raw == nullptr) return std::nullopt;
        detail::handle<tenure_item, tenure_item_free> it(raw);
        return detail::text(tenure_item_value(it.get()));
    }
    void cancel() const { detail::check(tenure_queue_cancel(h_.get())); }

  private:
    detail::handle<tenure_queue, tenure_queue_free> h_;
};

// A barrier: held while its key exists.
class barrier {
  public:
    barrier(const engine &db, std::string_view name) {
        const std::string n = detail::c_string(name, "barrier name");
        tenure_barrier *raw = nullptr;
        detail::check(tenure_barrier_new(db.get(), n.c_str(), &raw));
        h_ = decltype(h_)(raw);
    }
    // True if this call put the key.
    bool hold() const {
        bool put = false;
        detail::check(tenure_barrier_hold(h_.get(), &put));
        return put;
    }
    void release() const { detail::check(tenure_barrier_release(h_.get())); }
    void wait(milliseconds timeout = forever) const {
        detail::check(tenure_barrier_wait(h_.get(), detail::ms(timeout)));
    }
    void cancel() const { detail::check(tenure_barrier_cancel(h_.get())); }

  private:
    detail::handle<tenure_barrier, tenure_barrier_free> h_;
};

// One participant of a double barrier for `count`.
class double_barrier {
  public:
    double_barrier(const session &s, std::string_view name, std::int64_t count) {
        const std::string n = detail::c_string(name, "barrier name");
        tenure_double_barrier *raw = nullptr;
        detail::check(tenure_double_barrier_new(s.get(), n.c_str(), count, &raw));
        h_ = decltype(h_)(raw);
    }
    void enter(milliseconds timeout = forever) const {
        detail::check(tenure_double_barrier_enter(h_.get(), detail::ms(timeout)));
    }
    void leave(milliseconds timeout = forever) const {
        detail::check(tenure_double_barrier_leave(h_.get(), detail::ms(timeout)));
    }

  private:
    detail::handle<tenure_double_barrier, tenure_double_barrier_free> h_;
};

// A member of a group: its ID and capabilities.
struct member {
    std::string id;
    std::string capabilities;
};

namespace detail {
inline std::vector<member> take_members(tenure_member_list *raw) {
    handle<tenure_member_list, tenure_member_list_free> list(raw);
    std::vector<member> out;
    for (std::size_t i = 0; i < tenure_member_list_len(list.get()); i++)
        out.push_back({text(tenure_member_list_id(list.get(), i)),
                       text(tenure_member_list_capabilities(list.get(), i))});
    return out;
}
}  // namespace detail

// A session's membership of a group.
class group {
  public:
    group(const session &s, std::string_view name) {
        const std::string n = detail::c_string(name, "group name");
        tenure_group *raw = nullptr;
        detail::check(tenure_group_new(s.get(), n.c_str(), &raw));
        h_ = decltype(h_)(raw);
    }
    void join(std::string_view member_id, std::string_view capabilities = {}) const {
        const std::string m = detail::c_string(member_id, "member ID");
        detail::check(tenure_group_join(h_.get(), m.c_str(), detail::bytes(capabilities),
                                        capabilities.size()));
    }
    void leave() const { detail::check(tenure_group_leave(h_.get())); }
    // The live members of group `name`, in ID order.
    static std::vector<member> members(const engine &db, std::string_view name) {
        const std::string n = detail::c_string(name, "group name");
        tenure_member_list *raw = nullptr;
        detail::check(tenure_group_members(db.get(), n.c_str(), &raw));
        return detail::take_members(raw);
    }

  private:
    detail::handle<tenure_group, tenure_group_free> h_;
};

// The joins and leaves of a group.
class group_watcher {
  public:
    group_watcher(const engine &db, std::string_view name) {
        const std::string n = detail::c_string(name, "group name");
        tenure_group_watcher *raw = nullptr;
        detail::check(tenure_group_watch(db.get(), n.c_str(), &raw));
        h_ = decltype(h_)(raw);
    }
    // The next change: (joined, member); throws TENURE_ERR_TIMEOUT.
    std::pair<bool, member> next(milliseconds timeout = forever) const {
        bool joined = false;
        tenure_member_list *raw = nullptr;
        detail::check(tenure_group_watcher_next(h_.get(), detail::ms(timeout), &joined, &raw));
        return {joined, detail::take_members(raw).at(0)};
    }

  private:
    detail::handle<tenure_group_watcher, tenure_group_watcher_free> h_;
};

// Which live members of a group own a key (consistent hashing).
class partitioner {
  public:
    partitioner(const engine &db, std::string_view group, std::int64_t replicas) {
        const std::string g = detail::c_string(group, "group name");
        tenure_partitioner *raw = nullptr;
        detail::check(tenure_partitioner_new(db.get(), g.c_str(), replicas, &raw));
        h_ = decltype(h_)(raw);
    }
    std::vector<std::string> members_for(std::string_view key) const {
        tenure_member_list *raw = nullptr;
        detail::check(
            tenure_partitioner_members_for(h_.get(), detail::bytes(key), key.size(), &raw));
        std::vector<std::string> out;
        for (member &m : detail::take_members(raw)) out.push_back(std::move(m.id));
        return out;
    }
    // The primary owner of `key`, or nullopt when the group is empty.
    std::optional<std::string> primary_for(std::string_view key) const {
        tenure_member_list *raw = nullptr;
        detail::check(
            tenure_partitioner_primary_for(h_.get(), detail::bytes(key), key.size(), &raw));
        std::vector<member> one = detail::take_members(raw);
        if (one.empty()) return std::nullopt;
        return std::move(one.front().id);
    }

  private:
    detail::handle<tenure_partitioner, tenure_partitioner_free> h_;
};

}  // namespace tenurecpp

#endif  // TENURE_HPP
