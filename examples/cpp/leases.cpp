// Using libtenure from C++ through tenure.hpp: RAII handles, errors as exceptions carrying the
// result code, std::chrono TTLs and std::optional for "none".
//
// Build against an installed libtenure:
//   c++ -std=c++17 -Wall -Werror leases.cpp $(pkg-config --cflags --libs tenure) -o leases
#include <tenure.hpp>

#include <chrono>
#include <iostream>

using namespace std::chrono_literals;

int main() {
    try {
        tenurecpp::engine db = tenurecpp::engine::in_memory();
        tenurecpp::watcher watcher = db.watch("config/", {/*prefix=*/true, /*prev_kv=*/true});

        const tenurecpp::lease_id lease = db.grant(30s);
        db.put("config/mode", "blue", lease);
        const std::int64_t rev = db.put("config/mode", "green", lease);

        const std::optional<tenurecpp::key_value> kv = db.get("config/mode");
        std::cout << "config/mode = " << kv->value << " (version " << kv->version
                  << ", revision " << rev << ")\n";

        for (int i = 0; i < 2; i++) {
            const tenurecpp::event ev = watcher.next(5s);
            std::cout << "event: " << ev.kv.value << " (was "
                      << (ev.prev_kv ? ev.prev_kv->value : "nothing") << ")\n";
        }

        // Errors arrive as exceptions carrying the code and the detail.
        try {
            db.revoke(lease + 1000);
            std::cerr << "revoking an unknown lease should fail\n";
            return 1;
        } catch (const tenurecpp::error &e) {
            if (e.code() != TENURE_ERR_LEASE_NOT_FOUND) throw;
            std::cout << "expected error: " << e.what() << "\n";
        }

        db.revoke(lease);
        if (db.get("config/mode")) {
            std::cerr << "the key should be gone with its lease\n";
            return 1;
        }
        std::cout << "lease revoked, key gone\n";
        return 0;
    } catch (const std::exception &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
