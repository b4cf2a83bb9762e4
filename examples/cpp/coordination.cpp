// Coordination from C++ with small RAII wrappers over libtenure's C API: a session that
// closes itself, a scoped lock that unlocks itself, a leadership, and a leader elector whose
// callbacks are lambdas. Errors are exceptions carrying the result code.
//
// Build against an installed libtenure:
//   c++ -std=c++17 -pthread coordination.cpp $(pkg-config --cflags --libs tenure) -o coordination
#include <tenure.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace {

class tenure_error : public std::runtime_error {
  public:
    explicit tenure_error(tenure_result code)
        : std::runtime_error(std::string(tenure_result_str(code)) + ": " +
                             tenure_last_error_message()),
          code_(code) {}
    tenure_result code() const { return code_; }

  private:
    tenure_result code_;
};

void check(tenure_result rc) {
    if (rc != TENURE_OK) throw tenure_error(rc);
}

const std::uint8_t *bytes(std::string_view s) {
    return reinterpret_cast<const std::uint8_t *>(s.data());
}

// Owns a handle and frees it with its _free; movable, not copyable.
template <typename T, void (*Free)(T *)>
class handle {
  public:
    explicit handle(T *p = nullptr) : p_(p) {}
    handle(handle &&o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    handle &operator=(handle &&o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    ~handle() { Free(p_); }
    T *get() const { return p_; }

  private:
    T *p_;
};

class db {
  public:
    db() {
        tenure *raw = nullptr;
        check(tenure_open(nullptr, nullptr, &raw));
        h_ = handle<tenure, tenure_close>(raw);
    }
    tenure *get() const { return h_.get(); }

  private:
    handle<tenure, tenure_close> h_;
};

// A held lock; the destructor unlocks (tenure_lock_free releases a lock still held).
class scoped_lock {
  public:
    explicit scoped_lock(tenure_lock *l) : h_(l) {}
    std::int64_t fencing_token() const { return tenure_lock_fencing_token(h_.get()); }

  private:
    handle<tenure_lock, tenure_lock_free> h_;
};

class leadership {
  public:
    explicit leadership(tenure_leadership *l) : h_(l) {}
    std::int64_t fencing_token() const { return tenure_leadership_fencing_token(h_.get()); }
    void proclaim(std::string_view v) const {
        check(tenure_leadership_proclaim(h_.get(), bytes(v), v.size()));
    }
    void resign() const { check(tenure_leadership_resign(h_.get())); }

  private:
    handle<tenure_leadership, tenure_leadership_free> h_;
};

// A session whose destructor revokes its lease (close), then frees it.
class session {
  public:
    session(const db &d, std::chrono::milliseconds ttl) {
        tenure_session *raw = nullptr;
        check(tenure_session_new(d.get(), ttl.count(), &raw));
        h_ = handle<tenure_session, tenure_session_free>(raw);
    }
    ~session() { tenure_session_close(h_.get()); }
    session(session &&) = default;

    scoped_lock lock(const char *name, std::chrono::milliseconds timeout) const {
        tenure_lock *l = nullptr;
        check(tenure_mutex_lock(h_.get(), name, timeout.count(), &l));
        return scoped_lock(l);
    }
    scoped_lock try_lock(const char *name) const {
        tenure_lock *l = nullptr;
        check(tenure_mutex_try_lock(h_.get(), name, &l));
        return scoped_lock(l);
    }
    leadership campaign(const char *name, std::string_view value,
                        std::chrono::milliseconds timeout) const {
        tenure_leadership *l = nullptr;
        check(tenure_election_campaign(h_.get(), name, bytes(value), value.size(),
                                       timeout.count(), &l));
        return leadership(l);
    }
    // Interrupts this session's waits from any thread.
    void cancel() const { check(tenure_session_cancel(h_.get())); }

  private:
    handle<tenure_session, tenure_session_free> h_;
};

// A leader elector with std::function callbacks; the destructor stops it (after which every
// callback has run), so the callbacks never outlive the objects they capture.
class elector {
  public:
    struct callbacks {
        std::function<void(std::int64_t)> started = [](std::int64_t) {};
        std::function<void()> stopped = [] {};
        std::function<void(std::string_view)> new_leader = [](std::string_view) {};
    };

    elector(const db &d, const char *name, const char *identity, callbacks cb)
        : cb_(std::make_unique<callbacks>(std::move(cb))) {
        tenure_elector_config cfg;
        check(tenure_elector_config_init(&cfg));
        cfg.name = name;
        cfg.identity = identity;
        cfg.lease_duration_ms = 1500;
        cfg.renew_deadline_ms = 1000;
        cfg.retry_period_ms = 200;
        cfg.release_on_cancel = true;
        // C callbacks: plain functions with the `user` pointer first; no exception may escape.
        tenure_elector_callbacks c{
            [](void *u, std::int64_t t) { static_cast<callbacks *>(u)->started(t); },
            [](void *u) { static_cast<callbacks *>(u)->stopped(); },
            [](void *u, const char *who) { static_cast<callbacks *>(u)->new_leader(who); },
        };
        tenure_elector *raw = nullptr;
        check(tenure_elector_start(d.get(), &cfg, &c, cb_.get(), &raw));
        h_ = handle<tenure_elector, tenure_elector_free>(raw);
    }
    void stop() const { check(tenure_elector_stop(h_.get())); }

  private:
    std::unique_ptr<callbacks> cb_;  // declared first: destroyed after the elector stops
    handle<tenure_elector, tenure_elector_free> h_;
};

}  // namespace

int main() {
    try {
        db d;
        session alice(d, std::chrono::seconds(30)), bob(d, std::chrono::seconds(30));

        // A mutex: one holder at a time, fencing tokens increasing.
        std::int64_t first = 0;
        {
            scoped_lock held = alice.lock("jobs/nightly", std::chrono::seconds(5));
            first = held.fencing_token();
            try {
                bob.try_lock("jobs/nightly");
                return 1;
            } catch (const tenure_error &e) {
                std::cout << "bob: " << e.what() << "\n";  // TENURE_ERR_LOCKED
            }
        }  // unlocked here
        std::int64_t second = bob.lock("jobs/nightly", std::chrono::seconds(5)).fencing_token();
        std::cout << "tokens " << first << " < " << second << "\n";

        // A wait cancelled from another thread.
        scoped_lock held = alice.lock("jobs/weekly", std::chrono::seconds(5));
        // Cancelling is sticky, so the wait ends whether it starts before or after this.
        std::thread canceller([&] { bob.cancel(); });
        try {
            bob.lock("jobs/weekly", std::chrono::milliseconds(-1));  // no limit: only cancel
            return 1;
        } catch (const tenure_error &e) {
            std::cout << "bob's wait: " << e.what() << "\n";  // TENURE_ERR_TIMEOUT
        }
        canceller.join();

        // An election.
        leadership lead = alice.campaign("svc", "10.0.0.1:80", std::chrono::seconds(5));
        lead.proclaim("10.0.0.1:8080");
        std::cout << "alice leads svc with token " << lead.fencing_token() << "\n";
        lead.resign();

        // A leader elector with lambdas.
        std::mutex mu;
        std::condition_variable cv;
        std::int64_t token = 0;
        elector e(d, "daemon/leader", "cpp-node",
                  {[&](std::int64_t t) {
                       std::lock_guard<std::mutex> g(mu);
                       token = t;
                       cv.notify_all();
                   },
                   [] { std::cout << "elector: stopped leading\n"; },
                   [](std::string_view who) { std::cout << "elector: leader " << who << "\n"; }});
        {
            std::unique_lock<std::mutex> g(mu);
            if (!cv.wait_for(g, std::chrono::seconds(10), [&] { return token != 0; })) return 1;
        }
        std::cout << "elector: leading with token " << token << "\n";
        e.stop();
        return 0;
    } catch (const tenure_error &e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
}
