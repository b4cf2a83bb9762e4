// Using libtenure from C++: RAII ownership with std::unique_ptr and errors as exceptions.
//
// Build against an installed libtenure:
//   c++ -std=c++17 -Wall -Werror leases.cpp $(pkg-config --cflags --libs tenure) -o leases
#include <tenure.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

// A failed call, with the code's name and the library's detail message.
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

// One owning pointer type per object, each with its _free (tenure_close for the engine).
template <typename T, void (*Free)(T *)>
struct deleter {
    void operator()(T *p) const { Free(p); }
};
using db_ptr = std::unique_ptr<tenure, deleter<tenure, tenure_close>>;
using kv_ptr = std::unique_ptr<tenure_kv, deleter<tenure_kv, tenure_kv_free>>;
using watcher_ptr = std::unique_ptr<tenure_watcher, deleter<tenure_watcher, tenure_watcher_free>>;
using event_ptr = std::unique_ptr<tenure_event, deleter<tenure_event, tenure_event_free>>;

const std::uint8_t *bytes(std::string_view s) {
    return reinterpret_cast<const std::uint8_t *>(s.data());
}

std::string_view view(tenure_bytes b) {
    return {reinterpret_cast<const char *>(b.data), b.len};
}

db_ptr open_memory() {
    tenure_options opts;
    check(tenure_options_init(&opts));
    tenure *raw = nullptr;
    check(tenure_open(nullptr, &opts, &raw));
    return db_ptr(raw);
}

std::int64_t put(const db_ptr &db, std::string_view key, std::string_view value,
                 std::int64_t lease = 0) {
    std::int64_t revision = 0;
    check(tenure_put(db.get(), bytes(key), key.size(), bytes(value), value.size(), lease,
                     &revision));
    return revision;
}

kv_ptr get(const db_ptr &db, std::string_view key) {
    tenure_kv *raw = nullptr;
    check(tenure_get(db.get(), bytes(key), key.size(), &raw));
    return kv_ptr(raw);
}

}  // namespace

int main() {
    try {
        db_ptr db = open_memory();
        tenure_watcher *w = nullptr;
        const std::string_view prefix = "config/";
        check(tenure_watch(db.get(), bytes(prefix), prefix.size(),
                           TENURE_WATCH_PREFIX | TENURE_WATCH_PREV_KV, 0, &w));
        watcher_ptr watcher(w);

        std::int64_t lease = 0;
        check(tenure_lease_grant(db.get(), 30000, 0, &lease));
        put(db, "config/mode", "blue", lease);
        const std::int64_t rev = put(db, "config/mode", "green", lease);

        kv_ptr kv = get(db, "config/mode");
        std::cout << "config/mode = " << view(tenure_kv_value(kv.get())) << " (version "
                  << tenure_kv_version(kv.get()) << ", revision " << rev << ")\n";

        for (int i = 0; i < 2; i++) {
            tenure_event *e = nullptr;
            check(tenure_watcher_next(watcher.get(), 5000, &e));
            event_ptr ev(e);
            const tenure_kv *prev = tenure_event_prev_kv(ev.get());
            std::cout << "event: " << view(tenure_kv_value(tenure_event_kv(ev.get())))
                      << " (was " << (prev ? view(tenure_kv_value(prev)) : "nothing") << ")\n";
        }

        // Errors arrive as exceptions carrying the code and the detail.
        try {
            check(tenure_lease_revoke(db.get(), lease + 1000));
            std::cerr << "revoking an unknown lease should fail\n";
            return 1;
        } catch (const tenure_error &e) {
            if (e.code() != TENURE_ERR_LEASE_NOT_FOUND) throw;
            std::cout << "expected error: " << e.what() << "\n";
        }

        check(tenure_lease_revoke(db.get(), lease));
        if (get(db, "config/mode")) {
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
