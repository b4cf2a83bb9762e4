// Coordination from C++ through tenure.hpp: sessions, a lock that unlocks when it goes out of
// scope, a wait cancelled from another thread, a leadership, and a leader elector whose
// callbacks are lambdas. Errors are exceptions carrying the result code.
//
// Build against an installed libtenure:
//   c++ -std=c++17 -pthread coordination.cpp $(pkg-config --cflags --libs tenure) -o coordination
#include <tenure.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <iostream>
#include <mutex>
#include <thread>

using namespace std::chrono_literals;

int main() {
    try {
        tenurecpp::engine db = tenurecpp::engine::in_memory();
        tenurecpp::session alice(db, 30s), bob(db, 30s);

        // A mutex: one holder at a time, fencing tokens increasing.
        std::int64_t first = 0;
        {
            tenurecpp::lock_guard held = alice.lock("jobs/nightly", 5s);
            first = held.fencing_token();
            try {
                bob.try_lock("jobs/nightly");
                return 1;
            } catch (const tenurecpp::error &e) {
                std::cout << "bob: " << e.what() << "\n";  // TENURE_ERR_LOCKED
            }
        }  // unlocked here
        const std::int64_t second = bob.lock("jobs/nightly", 5s).fencing_token();
        std::cout << "tokens " << first << " < " << second << "\n";

        // A wait cancelled from another thread.
        tenurecpp::lock_guard held = alice.lock("jobs/weekly", 5s);
        // Cancelling is sticky, so the wait ends whether it starts before or after this.
        std::thread canceller([&] { bob.cancel(); });
        try {
            bob.lock("jobs/weekly", tenurecpp::forever);  // no limit: only the cancel ends it
            return 1;
        } catch (const tenurecpp::error &e) {
            if (e.code() != TENURE_ERR_TIMEOUT) throw;
            std::cout << "bob's wait: " << e.what() << "\n";
        }
        canceller.join();

        // An election.
        tenurecpp::leadership lead = alice.campaign("svc", "10.0.0.1:80", 5s);
        lead.proclaim("10.0.0.1:8080");
        std::cout << "alice leads svc with token " << lead.fencing_token() << " ("
                  << db.election_leader("svc")->value << ")\n";
        lead.resign();

        // A leader elector with lambdas; destroying it stops it after its last callback.
        std::mutex mu;
        std::condition_variable cv;
        std::int64_t token = 0;
        tenurecpp::elector_config cfg;
        cfg.name = "daemon/leader";
        cfg.identity = "cpp-node";
        cfg.lease_duration = 1500ms;
        cfg.renew_deadline = 1000ms;
        cfg.retry_period = 200ms;
        cfg.release_on_cancel = true;
        tenurecpp::elector e(db, cfg,
                             {[&](std::int64_t t) {
                                  std::lock_guard<std::mutex> g(mu);
                                  token = t;
                                  cv.notify_all();
                              },
                              [] { std::cout << "elector: stopped leading\n"; },
                              [](std::string_view who) {
                                  std::cout << "elector: leader " << who << "\n";
                              }});
        {
            std::unique_lock<std::mutex> g(mu);
            if (!cv.wait_for(g, 10s, [&] { return token != 0; })) return 1;
        }
        std::cout << "elector: leading with token " << token << " as " << *e.leader() << "\n";
        e.stop();
        return 0;
    } catch (const std::exception &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
