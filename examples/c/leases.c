/* A service registry in a few lines of C: each instance registers a key under a lease, keeps
 * it alive by renewing, and disappears (with a DELETE event for watchers) when the lease is
 * revoked or expires.
 *
 * Build against an installed libtenure:
 *   cc -std=c11 leases.c $(pkg-config --cflags --libs tenure) -o leases
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tenure.h>

/* Stops with the error's name and detail when a call fails. */
#define TRY(call)                                                                         \
    do {                                                                                  \
        tenure_result rc_ = (call);                                                       \
        if (rc_ != TENURE_OK) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, tenure_result_str(rc_), \
                    tenure_last_error_message());                                         \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define BYTES(s) (const uint8_t *)(s), strlen(s)

static void print_event(const tenure_event *ev) {
    tenure_bytes key = tenure_kv_key(tenure_event_kv(ev));
    tenure_bytes value = tenure_kv_value(tenure_event_kv(ev));
    printf("  event %-6s %.*s = %.*s (revision %lld)\n",
           tenure_event_type(ev) == TENURE_EVENT_PUT ? "PUT" : "DELETE", (int)key.len,
           (const char *)key.data, (int)value.len, (const char *)value.data,
           (long long)tenure_event_revision(ev));
}

int main(void) {
    printf("libtenure %s\n", tenure_version());

    tenure_options opts;
    TRY(tenure_options_init(&opts));
    tenure *db = NULL;
    TRY(tenure_open(NULL, &opts, &db)); /* NULL path: in memory */

    tenure_watcher *watcher = NULL;
    TRY(tenure_watch(db, BYTES("services/"), TENURE_WATCH_PREFIX, 0, &watcher));

    /* Two instances register, each under its own lease. */
    int64_t web1 = 0, web2 = 0;
    TRY(tenure_lease_grant(db, 10000, 0, &web1));
    TRY(tenure_lease_grant(db, 150, 0, &web2)); /* a short one, left to expire */
    int64_t revision = 0;
    TRY(tenure_put(db, BYTES("services/web/1"), BYTES("10.0.0.1:80"), web1, &revision));
    TRY(tenure_put(db, BYTES("services/web/2"), BYTES("10.0.0.2:80"), web2, &revision));
    printf("registered 2 instances, store revision %lld\n", (long long)revision);

    /* Keep-alive: renewing restarts the TTL. */
    int64_t ttl = 0;
    TRY(tenure_lease_renew(db, web1, &ttl));
    printf("renewed lease %lld (ttl %lld ms)\n", (long long)web1, (long long)ttl);

    /* Compare-and-swap: elect a leader only if nobody holds the key yet. */
    tenure_txn *txn = NULL;
    tenure_txn_response *resp = NULL;
    TRY(tenure_txn_new(&txn));
    TRY(tenure_txn_compare_version(txn, BYTES("services/leader"), TENURE_COMPARE_EQUAL, 0));
    TRY(tenure_txn_put(txn, true, BYTES("services/leader"), BYTES("web/1"), web1));
    TRY(tenure_txn_commit(db, txn, &resp));
    printf("leader election %s at revision %lld\n",
           tenure_txn_response_succeeded(resp) ? "won" : "lost",
           (long long)tenure_txn_response_revision(resp));
    tenure_txn_response_free(resp);
    tenure_txn_free(txn);

    /* The short lease expires on its own; the engine reports it with its keys. */
    tenure_expired *expired = NULL;
    TRY(tenure_expired_next(db, 5000, &expired));
    for (size_t i = 0; i < tenure_expired_len(expired); i++) {
        printf("lease %lld expired with %zu key(s)\n", (long long)tenure_expired_id(expired, i),
               tenure_expired_key_count(expired, i));
    }
    tenure_expired_free(expired);

    tenure_kv_list *live = NULL;
    TRY(tenure_range(db, BYTES("services/"), 0, &live));
    printf("live services: %zu\n", tenure_kv_list_len(live));
    for (size_t i = 0; i < tenure_kv_list_len(live); i++) {
        tenure_bytes k = tenure_kv_key(tenure_kv_list_get(live, i));
        printf("  %.*s\n", (int)k.len, (const char *)k.data);
    }
    tenure_kv_list_free(live);

    /* Revoking deletes every key of the lease in one write. */
    TRY(tenure_lease_revoke(db, web1));

    printf("watch saw:\n");
    tenure_event *ev = NULL;
    tenure_result rc;
    while ((rc = tenure_watcher_next(watcher, 0, &ev)) == TENURE_OK) {
        print_event(ev);
        tenure_event_free(ev);
    }
    if (rc != TENURE_ERR_TIMEOUT) TRY(rc);

    tenure_stats stats;
    TRY(tenure_stats_read(db, &stats));
    printf("granted %llu, expired %llu, revoked %llu, keys now %llu\n",
           (unsigned long long)stats.granted, (unsigned long long)stats.expired,
           (unsigned long long)stats.revoked, (unsigned long long)stats.keys);
    if (stats.keys != 0 || stats.expired != 1) {
        fprintf(stderr, "unexpected final state\n");
        return 1;
    }

    tenure_watcher_free(watcher);
    tenure_close(db);
    return 0;
}
