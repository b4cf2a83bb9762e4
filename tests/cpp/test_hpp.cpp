// Tests of include/tenure.hpp, the C++17 wrapper: failures become tenurecpp::error with the C
// code and message, destructors release what they own (ASan's leak check and the observable
// effects: a destroyed lock_guard unlocks, a destroyed watcher unregisters, a destroyed elector
// has run its last callback), durations and "none" map to std::chrono and std::optional.
// Built with -Wall -Wextra -Wpedantic -Werror (and stricter) under ASan+UBSan by `make test-c`.
#include <tenure.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using tenurecpp::engine;
using tenurecpp::error;

namespace {

std::atomic<int> failures{0};
std::atomic<long> checks{0};

// Bound on waits for something that happens at once (a wait returns when its event comes).
constexpr std::chrono::milliseconds wait_bound = 60s;

void fail(const char *file, int line, const std::string &what) {
    failures++;
    std::cerr << file << ":" << line << ": " << what << "\n";
}

#define CHECK(cond)                                                      \
    do {                                                                 \
        checks++;                                                        \
        if (!(cond)) fail(__FILE__, __LINE__, "CHECK failed: " #cond);   \
    } while (0)

#define CHECK_EQ(a, b)                                                                        \
    do {                                                                                      \
        checks++;                                                                             \
        const auto a_ = (a);                                                                  \
        const auto b_ = (b);                                                                  \
        if (!(a_ == b_))                                                                      \
            fail(__FILE__, __LINE__,                                                          \
                 "CHECK_EQ failed: " #a " == " #b " (" + std::to_string(a_) +                 \
                     " != " + std::to_string(b_) + ")");                                      \
    } while (0)

#define CHECK_STR(a, b)                                                                      \
    do {                                                                                     \
        checks++;                                                                            \
        const std::string a_(a), b_(b);                                                      \
        if (a_ != b_)                                                                        \
            fail(__FILE__, __LINE__, "CHECK_STR failed: " #a " == \"" + b_ + "\" (got \"" + \
                                         a_ + "\")");                                        \
    } while (0)

// `expr` throws tenurecpp::error with `want`; the error is then in scope as `caught`.
#define CHECK_THROWS(expr, want)                                                              \
    do {                                                                                      \
        checks++;                                                                             \
        try {                                                                                 \
            (void)(expr);                                                                     \
            fail(__FILE__, __LINE__, #expr " did not throw");                                 \
        } catch (const error &e_) {                                                           \
            if (e_.code() != (want))                                                          \
                fail(__FILE__, __LINE__,                                                      \
                     #expr " threw " + std::string(e_.what()) + ", want " +                   \
                         tenure_result_str(want));                                            \
        }                                                                                     \
    } while (0)

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

void errors_are_exceptions_with_the_code_and_the_message() {
    engine db = engine::in_memory();
    try {
        db.revoke(12345);
        fail(__FILE__, __LINE__, "revoke of an unknown lease did not throw");
    } catch (const std::runtime_error &base) {
        const auto *e = dynamic_cast<const error *>(&base);
        CHECK(e != nullptr);
        if (e) {
            CHECK_EQ(e->code(), TENURE_ERR_LEASE_NOT_FOUND);
            CHECK_STR(e->name(), "TENURE_ERR_LEASE_NOT_FOUND");
            CHECK_STR(e->what(),
                      "TENURE_ERR_LEASE_NOT_FOUND: tenure_lease_revoke: lease 12345 not found");
            // The message was copied: a later failure on this thread does not change it.
            CHECK_THROWS(db.grant(0ms), TENURE_ERR_INVALID_ARGUMENT);
            CHECK(contains(e->what(), "lease 12345 not found"));
        }
    }
    CHECK_THROWS(db.grant(-5s), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_THROWS(db.put("", "v"), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_THROWS(engine::open(""), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_THROWS(db.watch("k").next(-2ms), TENURE_ERR_INVALID_ARGUMENT);
    // Names and paths are NUL-terminated in C: a NUL inside is refused, not cut short.
    tenurecpp::session s(db, 60s);
    try {
        s.lock(std::string_view("jobs\0x", 6));
        fail(__FILE__, __LINE__, "a mutex name with a NUL was accepted");
    } catch (const error &e) {
        CHECK_EQ(e.code(), TENURE_ERR_INVALID_ARGUMENT);
        CHECK(contains(e.what(), "mutex name contains a NUL byte"));
    }
    CHECK_THROWS(engine::open(std::string_view("a\0b", 3)), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_THROWS(engine::connect("ftp://127.0.0.1:1"), TENURE_ERR_INVALID_ARGUMENT);
    // A moved-from object answers with an error, it does not crash.
    engine moved = std::move(db);
    CHECK_EQ(moved.revision(), 0);
    CHECK_THROWS(db.revision(), TENURE_ERR_NULL_POINTER);  // NOLINT(bugprone-use-after-move)
    s.close();
}

void keys_and_values_are_bytes() {
    engine db = engine::in_memory();
    const std::string binary_key("a\0b", 3), binary_value("\0\xff", 2);
    const std::int64_t r1 = db.put(binary_key, binary_value);
    CHECK_EQ(r1, 1);
    std::optional<tenurecpp::key_value> kv = db.get(binary_key);
    CHECK(kv.has_value());
    if (kv) {
        CHECK(kv->key == binary_key);
        CHECK(kv->value == binary_value);
        CHECK_EQ(kv->create_revision, 1);
        CHECK_EQ(kv->mod_revision, 1);
        CHECK_EQ(kv->version, 1);
        CHECK(!kv->lease.has_value());
    }
    CHECK(!db.get("a").has_value());
    db.put("p/1", "one");
    db.put("p/2", "two");
    db.put("p/3", "three");
    const std::vector<tenurecpp::key_value> all = db.range("p/");
    CHECK_EQ(all.size(), 3u);
    if (all.size() == 3) {
        CHECK_STR(all[0].key, "p/1");
        CHECK_STR(all[2].value, "three");
    }
    CHECK_EQ(db.range("p/", 2).size(), 2u);
    CHECK_EQ(db.range("").size(), 4u);
    CHECK(db.erase("p/1"));
    CHECK(!db.erase("p/1"));
    CHECK_EQ(db.erase_prefix("p/"), 2u);
    CHECK_EQ(db.revision(), 6);
    const tenure_stats st = db.stats();
    CHECK_EQ(st.keys, 1u);
    CHECK_EQ(st.revision, 6);
    const std::string metrics = db.metrics_prometheus();
    CHECK(metrics.find("\ntenure_keys 1\n") != std::string::npos);
    CHECK(metrics.find("\ntenure_revision 6\n") != std::string::npos);
    CHECK_STR(std::string(tenurecpp::version()),
              std::to_string(TENURE_VERSION_MAJOR) + "." + std::to_string(TENURE_VERSION_MINOR) +
                  "." + std::to_string(TENURE_VERSION_PATCH));
}

void leases_use_chrono_and_optional_on_a_manual_clock() {
    tenurecpp::manual_clock clock;
    engine db = engine::in_memory(tenurecpp::options().clock(clock).expired_retry_interval(1s));
    const tenurecpp::lease_id lease = db.grant(10s);
    CHECK(lease > 0);
    // 8 s: still alive after the 4 s advance below (expiry runs on its own thread, so a lease
    // due by then could already be gone), and with less time left than `lease` after its renew.
    CHECK_EQ(db.grant(8s, 777), 777);
    CHECK_THROWS(db.grant(8s, 777), TENURE_ERR_LEASE_EXISTS);
    db.put("w/a", "1", lease);
    db.attach(lease, "w/b");
    CHECK(db.lease_of("w/a") == std::optional<tenurecpp::lease_id>(lease));
    CHECK(!db.lease_of("nothing").has_value());
    CHECK(db.get("w/a").value().lease == std::optional<tenurecpp::lease_id>(lease));

    clock.advance(4s);
    tenurecpp::lease_info info = db.time_to_live(lease);
    CHECK_EQ(info.id, lease);
    CHECK(info.ttl == 10s);
    CHECK(info.remaining == std::optional<std::chrono::milliseconds>(6s));
    CHECK_EQ(info.keys.size(), 2u);
    CHECK(db.renew(lease) == 10s);
    CHECK(db.time_to_live(lease).remaining == std::optional<std::chrono::milliseconds>(10s));
    db.detach(lease, "w/b");
    CHECK_EQ(db.time_to_live(lease).keys.size(), 1u);
    const std::vector<tenurecpp::lease_info> all = db.leases();
    CHECK_EQ(all.size(), 2u);
    if (all.size() == 2) CHECK_EQ(all[0].id, 777);  // least time left first
    db.checkpoint(lease, 3s);

    // A standby has no deadlines (none, not -1) and refuses renewals.
    db.demote();
    CHECK(!db.is_primary());
    CHECK(!db.time_to_live(lease).remaining.has_value());
    CHECK_THROWS(db.renew(lease), TENURE_ERR_NOT_PRIMARY);
    db.promote();
    CHECK(db.is_primary());
    db.revoke(777);

    CHECK_THROWS(db.next_expired(0ms), TENURE_ERR_TIMEOUT);
    clock.advance(11s);
    const std::vector<tenurecpp::expired_lease> batch = db.next_expired(wait_bound);
    CHECK_EQ(batch.size(), 1u);
    if (batch.size() == 1) {
        CHECK_EQ(batch[0].id, lease);
        CHECK(batch[0].ttl == 10s);
        CHECK(batch[0].keys == std::vector<std::string>{"w/a"});
    }
    CHECK(!db.get("w/a").has_value());
    CHECK_THROWS(db.time_to_live(lease), TENURE_ERR_LEASE_NOT_FOUND);
}

void transactions_run_one_branch() {
    engine db = engine::in_memory();
    using tenurecpp::compare_op;
    using tenurecpp::op_type;
    tenurecpp::txn create;
    create.compare_version("cfg", compare_op::equal, 0);
    create.success().put("cfg", "v1").get("cfg");
    create.failure().get("cfg").range("", 0);
    tenurecpp::txn_response r = db.commit(create);
    CHECK(r.succeeded);
    CHECK_EQ(r.revision, 1);
    CHECK_EQ(r.results.size(), 2u);
    if (r.results.size() == 2) {
        CHECK(r.results[0].type == op_type::put);
        CHECK_EQ(r.results[0].revision, 1);
        CHECK(r.results[1].type == op_type::get);
        CHECK_EQ(r.results[1].kvs.size(), 1u);
    }
    // Committed again, the key exists: the failure branch runs.
    r = db.commit(create);
    CHECK(!r.succeeded);
    CHECK_EQ(r.revision, 1);
    CHECK_EQ(r.results.size(), 2u);
    if (r.results.size() == 2) {
        CHECK(r.results[1].type == op_type::range);
        CHECK_EQ(r.results[1].kvs.size(), 1u);
    }
    tenurecpp::txn swap;
    swap.compare_value("cfg", compare_op::equal, "v1")
        .compare_mod_revision("cfg", compare_op::less, 5)
        .compare_create_revision("cfg", compare_op::equal, 1)
        .compare_lease("cfg", compare_op::equal, 0);
    swap.success().erase("cfg").put("other/1", "x").erase_prefix("other/");
    r = db.commit(swap);
    CHECK(r.succeeded);
    if (r.results.size() == 3) {
        CHECK(r.results[0].type == op_type::erase);
        CHECK_EQ(r.results[0].deleted, 1u);
        CHECK(r.results[2].type == op_type::erase_prefix);
        CHECK_EQ(r.results[2].deleted, 1u);
    }
    tenurecpp::txn bad;
    bad.success().put("", "empty key");
    CHECK_THROWS(db.commit(bad), TENURE_ERR_INVALID_ARGUMENT);
}

void watchers_deliver_events_and_unregister_when_destroyed() {
    engine db = engine::in_memory();
    {
        tenurecpp::watch_options opts;
        opts.prefix = true;
        opts.prev_kv = true;
        tenurecpp::watcher w = db.watch("cfg/", opts);
        CHECK_EQ(db.stats().watchers, 1u);
        CHECK_THROWS(w.next(0ms), TENURE_ERR_TIMEOUT);
        db.put("cfg/a", "1");
        db.put("cfg/a", "2");
        db.put("other", "x");
        db.erase("cfg/a");
        tenurecpp::event e = w.next(wait_bound);
        CHECK(e.type == tenurecpp::event_type::put);
        CHECK_STR(e.kv.value, "1");
        CHECK(!e.prev_kv.has_value());
        e = w.next(wait_bound);
        CHECK_EQ(e.revision, 2);
        CHECK(e.prev_kv.has_value() && e.prev_kv->value == "1");
        e = w.next(wait_bound);
        CHECK(e.type == tenurecpp::event_type::erase);
        CHECK_STR(e.kv.key, "cfg/a");
        CHECK_EQ(e.revision, 4);
        // Moved, it still watches; the moved-from one is empty.
        tenurecpp::watcher moved = std::move(w);
        CHECK_THROWS(w.next(0ms), TENURE_ERR_NULL_POINTER);  // NOLINT(bugprone-use-after-move)
        CHECK_EQ(db.stats().watchers, 1u);
    }
    CHECK_EQ(db.stats().watchers, 0u);
    // A start revision replays the retained history.
    tenurecpp::watch_options from_start;
    from_start.start_revision = 1;
    tenurecpp::watcher replay = db.watch("cfg/a", from_start);
    CHECK_EQ(replay.next(wait_bound).revision, 1);
    CHECK_EQ(replay.next(wait_bound).revision, 2);
}

void engine_handles_clone_and_close() {
    engine first = engine::in_memory();
    engine second = first.clone();
    tenurecpp::watcher w = second.watch("k");
    first = engine::in_memory();  // releases the first handle; `second` keeps the engine open
    second.put("k", "v");
    CHECK_EQ(second.revision(), 1);
    CHECK_EQ(first.revision(), 0);
    engine third = second.clone();
    second.close();
    CHECK_THROWS(third.revision(), TENURE_ERR_CLOSED);
    CHECK_THROWS(second.revision(), TENURE_ERR_NULL_POINTER);
    CHECK(w.next(wait_bound).kv.value == "v");
    CHECK_THROWS(w.next(wait_bound), TENURE_ERR_CLOSED);
    CHECK_THROWS(third.clone(), TENURE_ERR_CLOSED);
}

void locks_unlock_when_destroyed_and_sessions_orphan() {
    engine db = engine::in_memory();
    tenurecpp::session a(db, 60s);
    tenurecpp::session_options opts;
    opts.ttl = 30s;
    opts.keepalive_interval = 5s;
    tenurecpp::session b(db, opts);
    CHECK(db.time_to_live(b.lease()).ttl == 30s);
    std::int64_t first = 0;
    {
        tenurecpp::lock_guard held = a.lock("jobs", wait_bound);
        CHECK(held.is_held());
        first = held.fencing_token();
        CHECK_THROWS(b.try_lock("jobs"), TENURE_ERR_LOCKED);
    }
    tenurecpp::lock_guard by_b = b.try_lock("jobs");
    CHECK(by_b.fencing_token() > first);
    // Move-assigning releases the lock held before.
    by_b = b.try_lock("other");
    tenurecpp::lock_guard by_a = a.try_lock("jobs");
    by_a.unlock();
    CHECK(!by_a.is_held());
    CHECK(by_a.fencing_token() > first);
    CHECK_THROWS(by_a.unlock(), TENURE_ERR_NOT_LEADER);

    // Bounded holds (SPEC S9): options on lock and try_lock; a negative one is refused.
    {
        tenurecpp::mutex_options bounded;
        bounded.lock_delay = 1s;
        bounded.max_hold = 60s;
        tenurecpp::lock_guard held = a.lock("bounded", bounded, wait_bound);
        CHECK(held.is_held());
        CHECK_THROWS(b.try_lock("bounded", bounded), TENURE_ERR_LOCKED);
        held.unlock();
        tenurecpp::mutex_options bad;
        bad.max_hold = -1ms;
        CHECK_THROWS(b.try_lock("bounded", bad), TENURE_ERR_INVALID_ARGUMENT);
        CHECK(b.try_lock("bounded", tenurecpp::mutex_options{}).is_held());
    }

    // A semaphore of two permits (SPEC S7): a third holder is refused until one releases.
    {
        tenurecpp::permit_guard pa = a.acquire("pool", 2, wait_bound);
        tenurecpp::permit_guard pb = b.try_acquire("pool", 2);
        CHECK(pa.is_held() && pb.fencing_token() > pa.fencing_token());
        CHECK_THROWS(tenurecpp::session(db, opts).try_acquire("pool", 2), TENURE_ERR_LOCKED);
        pa.release();
        CHECK(!pa.is_held());
        CHECK_THROWS(pa.release(), TENURE_ERR_NOT_LEADER);
    }

    // A read-write lock (SPEC S8): readers share, a writer is refused until they release.
    {
        tenurecpp::rw_guard ra = a.rw_lock("cfg", false, wait_bound);
        tenurecpp::rw_guard rb = b.try_rw_lock("cfg", false);
        CHECK(!ra.is_write() && rb.is_held() && rb.fencing_token() > ra.fencing_token());
        CHECK_THROWS(tenurecpp::session(db, opts).try_rw_lock("cfg", true), TENURE_ERR_LOCKED);
        ra.release();
        rb.release();
        tenurecpp::rw_guard w = a.try_rw_lock("cfg", true);
        CHECK(w.is_write() && w.is_held());
        w.release();
        CHECK_THROWS(w.release(), TENURE_ERR_NOT_LEADER);
    }

    // A cancelled session's waits end with TENURE_ERR_TIMEOUT.
    std::thread canceller([&] { a.cancel(); });
    CHECK_THROWS(a.lock("other", tenurecpp::forever), TENURE_ERR_TIMEOUT);
    canceller.join();
    CHECK_THROWS(a.wait_done(tenurecpp::forever), TENURE_ERR_TIMEOUT);

    // Destroying a session orphans its lease: it lives on until resumed or expired.
    tenurecpp::lease_id orphaned = 0;
    {
        tenurecpp::session c(db, 60s);
        orphaned = c.lease();
    }
    CHECK_EQ(db.time_to_live(orphaned).id, orphaned);
    tenurecpp::session resumed = tenurecpp::session::resume(db, orphaned);
    CHECK_EQ(resumed.lease(), orphaned);
    CHECK(!resumed.done());
    resumed.close();
    CHECK(resumed.done());
    resumed.wait_done(0ms);
    CHECK_THROWS(db.time_to_live(orphaned), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_THROWS(resumed.lock("x", 0ms), TENURE_ERR_SESSION_EXPIRED);
    b.orphan();
    CHECK_THROWS(tenurecpp::session::resume(db, 424242), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_THROWS(tenurecpp::session::resume(db, b.lease(), tenurecpp::session_options{30s, -1ms}),
                 TENURE_ERR_INVALID_ARGUMENT);
    a.close();
    b.close();
}

void elections_and_observers() {
    engine db = engine::in_memory();
    tenurecpp::session a(db, 60s), b(db, 60s);
    CHECK(!db.election_leader("svc").has_value());
    tenurecpp::observer obs = db.observe("svc");
    CHECK(!obs.next(wait_bound).has_value());  // the current state: no leader
    tenurecpp::leadership lead = a.campaign("svc", "host-a", wait_bound);
    CHECK(lead.is_held());
    CHECK(contains(lead.key(), "svc/"));
    std::optional<tenurecpp::key_value> seen = obs.next(wait_bound);
    CHECK(seen.has_value() && seen->value == "host-a");
    lead.proclaim("host-a:8080");
    seen = obs.next(wait_bound);
    CHECK(seen.has_value() && seen->value == "host-a:8080");
    CHECK_EQ(db.election_leader("svc").value().create_revision, lead.fencing_token());
    CHECK_THROWS(b.campaign("svc", "host-b", 0ms), TENURE_ERR_TIMEOUT);
    lead.resign();
    CHECK(!lead.is_held());
    CHECK_THROWS(lead.proclaim("late"), TENURE_ERR_NOT_LEADER);
    CHECK(!obs.next(wait_bound).has_value());
    tenurecpp::leadership next = b.campaign("svc", "host-b", wait_bound);
    CHECK(next.fencing_token() > lead.fencing_token());
    CHECK(obs.next(wait_bound).value().value == "host-b");
    obs.cancel();
    CHECK_THROWS(obs.next(tenurecpp::forever), TENURE_ERR_TIMEOUT);
    a.close();
    b.close();
}

void electors_call_back_and_stop_when_destroyed() {
    engine db = engine::in_memory();
    std::mutex mu;
    std::condition_variable cv;
    std::int64_t token = 0;
    int stopped = 0;
    std::vector<std::string> leaders;
    tenurecpp::elector_config cfg;
    cfg.name = "daemon/leader";
    cfg.identity = "node-1";
    cfg.lease_duration = 1500ms;
    cfg.renew_deadline = 1000ms;
    cfg.retry_period = 200ms;
    cfg.release_on_cancel = true;
    {
        tenurecpp::elector first(db, cfg,
                                 {[&](std::int64_t t) {
                                      std::lock_guard<std::mutex> g(mu);
                                      token = t;
                                      cv.notify_all();
                                  },
                                  [&] {
                                      std::lock_guard<std::mutex> g(mu);
                                      stopped++;
                                  },
                                  [&](std::string_view who) {
                                      std::lock_guard<std::mutex> g(mu);
                                      leaders.emplace_back(who);
                                  }});
        {
            std::unique_lock<std::mutex> g(mu);
            CHECK(cv.wait_for(g, wait_bound, [&] { return token != 0; }));
        }
        CHECK(first.is_leader());
        CHECK(first.leader() == std::optional<std::string>("node-1"));
        tenurecpp::elector moved = std::move(first);
        CHECK(moved.is_leader());
        CHECK(!first.is_leader());  // NOLINT(bugprone-use-after-move)
    }  // destroying `moved` stops it: its last callback has run
    {
        std::lock_guard<std::mutex> g(mu);
        CHECK_EQ(stopped, 1);
        CHECK(!leaders.empty() && leaders.front() == "node-1");
    }
    // Empty callbacks are fine; a bad config is refused before any thread starts.
    cfg.identity = "node-2";
    tenurecpp::elector quiet(db, cfg, {});
    CHECK(!quiet.leader().has_value() || *quiet.leader() == "node-2");
    quiet.stop();
    quiet.stop();
    cfg.renew_deadline = cfg.lease_duration;
    CHECK_THROWS(tenurecpp::elector(db, cfg, {}), TENURE_ERR_INVALID_ARGUMENT);
    cfg.identity = std::string("no\0de", 5);
    CHECK_THROWS(tenurecpp::elector(db, cfg, {}), TENURE_ERR_INVALID_ARGUMENT);
}

void fences_record_locks_and_keep_alives() {
    tenurecpp::fence_gate gate;
    CHECK_EQ(gate.highest(), 0);
    gate.admit(5);
    gate.admit(5);
    CHECK_THROWS(gate.admit(4), TENURE_ERR_STALE_TOKEN);
    CHECK_EQ(gate.highest(), 5);

    engine db = engine::in_memory();
    const std::int64_t token = db.try_acquire_record_lock("rec", "me", 30s);
    CHECK(token > 0);
    CHECK_THROWS(db.try_acquire_record_lock("rec", "you", 30s), TENURE_ERR_LOCKED);
    CHECK_THROWS(db.refresh_record_lock("rec", "you"), TENURE_ERR_NOT_LEADER);
    db.refresh_record_lock("rec", "me");
    db.release_record_lock("rec", "me");
    CHECK(db.try_acquire_record_lock("rec", "you", 30s) > token);

    const tenurecpp::lease_id lease = db.grant(60s);
    tenurecpp::keep_alive ka = db.start_keep_alive(lease);
    CHECK(ka.is_alive());
    CHECK(!ka.failure().has_value());
    CHECK_THROWS(db.start_keep_alive(lease + 1000), TENURE_ERR_LEASE_NOT_FOUND);
}

void files_and_snapshots() {
    char tmpl[] = "/tmp/tenure-hpp-XXXXXX";
    const char *made = mkdtemp(tmpl);
    CHECK(made != nullptr);
    if (!made) return;
    const std::filesystem::path dir(made);
    const std::string db_path = (dir / "app.tenure").string();
    const std::string copy_path = (dir / "copy.tenure").string();
    {
        engine db = engine::open(db_path, tenurecpp::options().buffered(5ms).recovery_extend(1s));
        db.put("k", "v", db.grant(60s));
        CHECK_THROWS(engine::open(db_path), TENURE_ERR_ALREADY_OPEN);
        std::uint64_t last_done = 0, last_total = 0;
        const tenure_snapshot_info info =
            db.snapshot(copy_path, [&](std::uint64_t done, std::uint64_t total) {
                last_done = done;
                last_total = total;
            });
        CHECK_EQ(info.keys, 1u);
        CHECK_EQ(info.leases, 1u);
        CHECK_EQ(info.revision, 1);
        CHECK(last_total > 0 && last_done == last_total);
        CHECK_THROWS(db.snapshot(db_path), TENURE_ERR_INVALID_ARGUMENT);
        CHECK_THROWS(engine::in_memory().snapshot(copy_path), TENURE_ERR_INVALID_ARGUMENT);
    }
    {
        engine copy = engine::open(copy_path);
        CHECK(copy.get("k").has_value());
    }
    engine reopened = engine::open(db_path, tenurecpp::options().immediate().recovery_wall());
    CHECK_STR(reopened.get("k").value().value, "v");
    reopened.close();
    std::filesystem::remove_all(dir);
}

// K9, K13, K14: reads at a revision through range options, the compaction revision on the
// error, a physical compaction and a future revision.
void history_reads_and_revision_errors() {
    char tmpl[] = "/tmp/tenure-hpp-XXXXXX";
    const char *made = mkdtemp(tmpl);
    CHECK(made != nullptr);
    if (!made) return;
    const std::filesystem::path dir(made);
    {
        engine db = engine::open((dir / "history.tenure").string());
        const std::int64_t r1 = db.put("k", "v1");
        db.put("k", "v2");
        const std::int64_t r3 = db.put("other", "o");
        CHECK_EQ(db.range_at("", 0, r1).size(), 1u);
        CHECK_STR(db.range_at("", 0, r1).at(0).value, "v1");
        tenure_range_options opts{};
        opts.limit = 1;
        opts.revision = r3;
        CHECK_EQ(db.range("", opts).size(), 1u);
        CHECK_THROWS(db.get_at("k", r3 + 1), TENURE_ERR_FUTURE_REVISION);
        db.compact(r3, true);
        try {
            (void)db.get_at("k", r1);
            CHECK(false);
        } catch (const error &e) {
            CHECK_EQ(e.code(), TENURE_ERR_COMPACTED);
            CHECK_EQ(e.compact_revision(), r3);
        }
        CHECK_STR(db.get_at("k", r3).value().value, "v2");
    }
    std::filesystem::remove_all(dir);
}

// SPEC E20/E25 through tenure.hpp: past the quota a put throws QUOTA_EXCEEDED and NOSPACE is
// raised; compact, defragment and disarm let writes in again.
void quota_alarms_and_defragment() {
    char tmpl[] = "/tmp/tenure-hpp-XXXXXX";
    const char *made = mkdtemp(tmpl);
    CHECK(made != nullptr);
    if (!made) return;
    const std::filesystem::path dir(made);
    std::uint64_t empty = 0;
    {
        engine probe = engine::open((dir / "probe.tenure").string());
        empty = probe.storage_size().file_bytes;
        CHECK_EQ(probe.quota_backend_bytes(), 0u);
    }
    const std::uint64_t quota = empty + (1u << 20);
    const tenure_alarm nospace{9, TENURE_ALARM_NOSPACE};
    {
        engine db = engine::open((dir / "q.tenure").string(),
                                 tenurecpp::options().quota_backend_bytes(quota).member_id(9));
        CHECK_EQ(db.quota_backend_bytes(), quota);
        CHECK_EQ(db.member_id(), 9u);
        CHECK(db.alarms().empty());
        const std::string value(16 * 1024, 'x');
        int written = 0;
        tenure_result code = TENURE_OK;
        try {
            for (; written < 4096; written++) db.put("fill/" + std::to_string(written), value);
        } catch (const error &e) {
            code = e.code();
        }
        CHECK(written > 0);
        CHECK_EQ(code, TENURE_ERR_QUOTA_EXCEEDED);
        const std::vector<tenure_alarm> raised = db.alarms();
        CHECK_EQ(raised.size(), 1u);
        if (raised.size() == 1) {
            CHECK_EQ(raised[0].member, 9u);
            CHECK_EQ(raised[0].kind, TENURE_ALARM_NOSPACE);
        }
        CHECK(contains(db.metrics_prometheus(), "\ntenure_server_alarm_nospace 1\n"));
        CHECK(contains(db.metrics_prometheus(),
                       "\netcd_server_quota_backend_bytes " + std::to_string(quota) + "\n"));
        CHECK_EQ(db.erase_prefix("fill/"), static_cast<std::uint64_t>(written));
        db.compact(db.revision(), true);
        CHECK(db.defragment().file_bytes < quota - 4 * value.size());
        CHECK(db.disarm_alarm(nospace));
        CHECK(!db.disarm_alarm(nospace));
        CHECK(contains(db.metrics_prometheus(), "\ntenure_server_alarm_nospace 0\n"));
        db.put("again", value);
        // More alarms than the first array holds: it grows.
        for (std::uint64_t m = 1; m <= 6; m++) CHECK(db.raise_alarm({m, TENURE_ALARM_CORRUPT}));
        CHECK_EQ(db.alarms().size(), 6u);
        CHECK_THROWS(db.put("k", "v"), TENURE_ERR_UNAVAILABLE);
        CHECK_THROWS(db.raise_alarm({1, 0}), TENURE_ERR_INVALID_ARGUMENT);
    }
    std::filesystem::remove_all(dir);
}

// P18: the shared option (several processes on one file; tests/c/test_shared.c runs two).
void shared_option_and_owner() {
    CHECK(!tenurecpp::options().get()->shared);
    CHECK(tenurecpp::options().shared(true).get()->shared);
    CHECK(engine::in_memory().stats().owner);
    char tmpl[] = "/tmp/tenure-hpp-XXXXXX";
    const char *made = mkdtemp(tmpl);
    CHECK(made != nullptr);
    if (!made) return;
    const std::filesystem::path dir(made);
    CHECK_THROWS(engine::in_memory(tenurecpp::options().shared(true)), TENURE_ERR_INVALID_ARGUMENT);
    {
        engine db = engine::open((dir / "shared.tenure").string(), tenurecpp::options().shared(true));
        CHECK(db.stats().owner);
        db.put("k", "v");
        CHECK_STR(db.get("k").value().value, "v");
        // A second shared open, in this process too, reaches the owner (SPEC P1).
        engine other = engine::open((dir / "shared.tenure").string(), tenurecpp::options().shared(true));
        CHECK(!other.stats().owner);
        CHECK_STR(other.get("k").value().value, "v");
    }
    std::filesystem::remove_all(dir);
}

struct test_case {
    const char *name;
    void (*fn)();
};

}  // namespace

int main() {
    const test_case cases[] = {
        {"errors_are_exceptions_with_the_code_and_the_message",
         errors_are_exceptions_with_the_code_and_the_message},
        {"keys_and_values_are_bytes", keys_and_values_are_bytes},
        {"leases_use_chrono_and_optional_on_a_manual_clock",
         leases_use_chrono_and_optional_on_a_manual_clock},
        {"transactions_run_one_branch", transactions_run_one_branch},
        {"watchers_deliver_events_and_unregister_when_destroyed",
         watchers_deliver_events_and_unregister_when_destroyed},
        {"engine_handles_clone_and_close", engine_handles_clone_and_close},
        {"locks_unlock_when_destroyed_and_sessions_orphan",
         locks_unlock_when_destroyed_and_sessions_orphan},
        {"elections_and_observers", elections_and_observers},
        {"electors_call_back_and_stop_when_destroyed", electors_call_back_and_stop_when_destroyed},
        {"fences_record_locks_and_keep_alives", fences_record_locks_and_keep_alives},
        {"files_and_snapshots", files_and_snapshots},
        {"history_reads_and_revision_errors", history_reads_and_revision_errors},
        {"shared_option_and_owner", shared_option_and_owner},
        {"quota_alarms_and_defragment", quota_alarms_and_defragment},
    };
    int failed = 0;
    for (const test_case &c : cases) {
        const int before = failures.load();
        try {
            c.fn();
        } catch (const std::exception &e) {
            fail(__FILE__, __LINE__, std::string(c.name) + ": unexpected exception: " + e.what());
        }
        if (failures.load() != before) {
            failed++;
            std::cerr << "FAILED: " << c.name << "\n";
        }
    }
    const int total = static_cast<int>(sizeof(cases) / sizeof(cases[0]));
    std::cout << "C++ tests (tenure.hpp): " << total - failed << " passed, " << failed
              << " failed, " << checks.load() << " checks\n";
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
