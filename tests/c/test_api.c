/* Library-level functions, options, NULL in every pointer parameter, *_free(NULL), and the
 * accessors' answers for NULL objects. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "check.h"

/* Test hooks of a libtenure built with the `test-hooks` feature (deliberately not in the
 * header): they panic inside the boundary. */
tenure_result tenure_test_panic(void);
int64_t tenure_test_panic_value(void);

static void version_string_matches_the_header_defines(void) {
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", TENURE_VERSION_MAJOR, TENURE_VERSION_MINOR,
             TENURE_VERSION_PATCH);
    CHECK(strcmp(tenure_version(), want) == 0);
}

static void result_str_names_every_code_and_unknown_numbers(void) {
    static const struct {
        tenure_result code;
        const char *name;
    } codes[] = {
        {TENURE_OK, "TENURE_OK"},
        {TENURE_ERR_INVALID_ARGUMENT, "TENURE_ERR_INVALID_ARGUMENT"},
        {TENURE_ERR_NULL_POINTER, "TENURE_ERR_NULL_POINTER"},
        {TENURE_ERR_LEASE_NOT_FOUND, "TENURE_ERR_LEASE_NOT_FOUND"},
        {TENURE_ERR_LEASE_EXISTS, "TENURE_ERR_LEASE_EXISTS"},
        {TENURE_ERR_LEASE_EXPIRED, "TENURE_ERR_LEASE_EXPIRED"},
        {TENURE_ERR_LEASE_TTL_TOO_LARGE, "TENURE_ERR_LEASE_TTL_TOO_LARGE"},
        {TENURE_ERR_NOT_PRIMARY, "TENURE_ERR_NOT_PRIMARY"},
        {TENURE_ERR_COMPACTED, "TENURE_ERR_COMPACTED"},
        {TENURE_ERR_ALREADY_OPEN, "TENURE_ERR_ALREADY_OPEN"},
        {TENURE_ERR_CORRUPT, "TENURE_ERR_CORRUPT"},
        {TENURE_ERR_STORAGE, "TENURE_ERR_STORAGE"},
        {TENURE_ERR_CLOSED, "TENURE_ERR_CLOSED"},
        {TENURE_ERR_TIMEOUT, "TENURE_ERR_TIMEOUT"},
        {TENURE_ERR_LOCKED, "TENURE_ERR_LOCKED"},
        {TENURE_ERR_SESSION_EXPIRED, "TENURE_ERR_SESSION_EXPIRED"},
        {TENURE_ERR_NOT_LEADER, "TENURE_ERR_NOT_LEADER"},
        {TENURE_ERR_STALE_TOKEN, "TENURE_ERR_STALE_TOKEN"},
        {TENURE_ERR_PANIC, "TENURE_ERR_PANIC"},
        {TENURE_ERR_UNSUPPORTED, "TENURE_ERR_UNSUPPORTED"},
        {TENURE_ERR_UNAVAILABLE, "TENURE_ERR_UNAVAILABLE"},
        {TENURE_ERR_PERMISSION_DENIED, "TENURE_ERR_PERMISSION_DENIED"},
        {TENURE_ERR_UNAUTHENTICATED, "TENURE_ERR_UNAUTHENTICATED"},
        {TENURE_ERR_FUTURE_REVISION, "TENURE_ERR_FUTURE_REVISION"},
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        CHECK_EQ(codes[i].code, (tenure_result)i); /* never renumbered */
        CHECK(strcmp(tenure_result_str(codes[i].code), codes[i].name) == 0);
    }
    /* SPEC E20: a write refused by the space quota or a NOSPACE alarm. */
    CHECK_EQ(TENURE_ERR_QUOTA_EXCEEDED, 24);
    CHECK(strcmp(tenure_result_str(TENURE_ERR_QUOTA_EXCEEDED), "TENURE_ERR_QUOTA_EXCEEDED") == 0);
    CHECK(strcmp(tenure_result_str(25), "TENURE_ERR_UNKNOWN") == 0);
    CHECK(strcmp(tenure_result_str(-1), "TENURE_ERR_UNKNOWN") == 0);
    CHECK(strcmp(tenure_result_str(INT32_MIN), "TENURE_ERR_UNKNOWN") == 0);
}

static void *fresh_thread_message(void *arg) {
    (void)arg;
    const char *before = tenure_last_error_message();
    int empty = before != NULL && before[0] == '\0';
    tenure *db = NULL;
    tenure_result rc = tenure_clone(NULL, &db);
    int named = rc == TENURE_ERR_NULL_POINTER &&
                strstr(tenure_last_error_message(), "tenure_clone") != NULL;
    return (void *)(intptr_t)(empty && named);
}

static void last_error_message_is_per_thread_and_names_the_function(void) {
    tenure *db = open_memory(NULL);
    CHECK_RC(tenure_lease_revoke(db, 424242), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_MSG("tenure_lease_revoke");
    CHECK_MSG("lease 424242 not found");
    pthread_t t;
    void *ok = NULL;
    CHECK(pthread_create(&t, NULL, fresh_thread_message, NULL) == 0);
    CHECK(pthread_join(t, &ok) == 0);
    CHECK(ok == (void *)1);
    /* The other thread's failure did not touch this thread's message. */
    CHECK_MSG("lease 424242 not found");
    /* A success leaves the last failure's message in place (errno style). */
    int64_t rev = -1;
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_MSG("lease 424242 not found");
    tenure_close(db);
}

static void options_init_fills_the_documented_defaults(void) {
    tenure_options o;
    memset(&o, 0xAB, sizeof o);
    CHECK_OK(tenure_options_init(&o));
    CHECK_EQ(o.durability, TENURE_DURABILITY_IMMEDIATE);
    CHECK_EQ(o.flush_interval_ms, 10);
    CHECK_EQ(o.recovery, TENURE_RECOVERY_WALL);
    CHECK_EQ(o.extend_ms, 0);
    CHECK_EQ(o.min_ttl_ms, 0);
    CHECK_EQ(o.checkpoint_interval_ms, 5000);
    CHECK_EQ(o.expired_retry_interval_ms, 3000);
    CHECK(o.primary);
    CHECK(o.auto_revoke);
    CHECK_EQ(o.watch_history, 10000);
    CHECK_EQ(o.watch_queue, 10000);
    CHECK(o.clock == NULL);
    CHECK_RC(tenure_options_init(NULL), TENURE_ERR_NULL_POINTER);
}

static void open_with_null_options_uses_the_defaults(void) {
    tenure *db = NULL;
    CHECK_OK(tenure_open(NULL, NULL, &db));
    CHECK(db != NULL);
    bool primary = false;
    CHECK_OK(tenure_is_primary(db, &primary));
    CHECK(primary);
    tenure_close(db);
}

static void bad_options_are_invalid_arguments_and_open_nothing(void) {
    tenure_options o;
    tenure *db = (tenure *)(uintptr_t)0x1; /* sentinel: must stay untouched */
    tenure *const sentinel = db;

    tenure_options_init(&o);
    o.durability = 7;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("durability");

    tenure_options_init(&o);
    o.recovery = -1;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("recovery");

    tenure_options_init(&o);
    o.durability = TENURE_DURABILITY_BUFFERED;
    o.flush_interval_ms = 0;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);

    tenure_options_init(&o);
    o.durability = TENURE_DURABILITY_BUFFERED;
    o.flush_interval_ms = -5;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("flush_interval_ms");

    tenure_options_init(&o);
    o.recovery = TENURE_RECOVERY_EXTEND;
    o.extend_ms = -1;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);

    tenure_options_init(&o);
    o.min_ttl_ms = -1;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);

    tenure_options_init(&o);
    o.checkpoint_interval_ms = 0;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("checkpoint_interval");

    tenure_options_init(&o);
    o.expired_retry_interval_ms = 0;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);

    tenure_options_init(&o);
    o.expired_retry_interval_ms = INT64_MIN;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);

    CHECK(db == sentinel);
}

/* NULL in every pointer parameter of every function that takes one. Out-parameters keep their
 * sentinel values, and nothing happens (checked through the stats). */
static void null_in_every_pointer_parameter_is_a_null_pointer_error(void) {
    const int64_t SENT = -77;
    tenure *db = open_memory(NULL);
    tenure *out_db = NULL;
    tenure_clock *clock = NULL;
    tenure_txn *txn = NULL;
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    CHECK_OK(tenure_txn_new(&txn));
    CHECK_OK(tenure_watch(db, S("k"), 0, 0, &w));
    int64_t lease = 0;
    CHECK_OK(tenure_lease_grant(db, 60000, 0, &lease));

    tenure_stats s;
    tenure_kv *kv = NULL;
    tenure_kv_list *kvl = NULL;
    tenure_lease_info *info = NULL;
    tenure_lease_list *ll = NULL;
    tenure_expired *exp = NULL;
    tenure_txn_response *resp = NULL;
    tenure_event *ev = NULL;
    int64_t i64 = SENT;
    bool b = false;
    uint64_t u64 = 0;

    /* engine */
    CHECK_RC(tenure_open(NULL, NULL, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_MSG("`out`");
    CHECK_RC(tenure_clone(NULL, &out_db), TENURE_ERR_NULL_POINTER);
    CHECK_MSG("`db`");
    CHECK_RC(tenure_clone(db, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_stats_read(NULL, &s), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_stats_read(db, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_clock_manual_new(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_clock_advance(NULL, 1), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_clock_step_wall(NULL, 1), TENURE_ERR_NULL_POINTER);
    CHECK(out_db == NULL);

    /* keys */
    CHECK_RC(tenure_put(NULL, S("k"), S("v"), 0, &i64), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_put(db, NULL, 1, S("v"), 0, &i64), TENURE_ERR_NULL_POINTER);
    CHECK_MSG("`key`");
    CHECK_RC(tenure_put(db, S("k"), NULL, 1, 0, &i64), TENURE_ERR_NULL_POINTER);
    CHECK_MSG("`value`");
    CHECK_RC(tenure_get(NULL, S("k"), &kv), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_get(db, NULL, 1, &kv), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_get(db, S("k"), NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_delete(NULL, S("k"), &b), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_delete(db, NULL, 1, &b), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_delete_prefix(NULL, S("k"), &u64), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_delete_prefix(db, NULL, 1, &u64), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_range(NULL, S("k"), 0, &kvl), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_range(db, NULL, 1, 0, &kvl), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_range(db, S("k"), 0, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_revision(NULL, &i64), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_revision(db, NULL), TENURE_ERR_NULL_POINTER);

    /* leases */
    CHECK_RC(tenure_lease_grant(NULL, 1000, 0, &i64), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_grant(db, 1000, 0, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_grant(db, 1000, 555, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_revoke(NULL, lease), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_renew(NULL, lease, &i64), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_time_to_live(NULL, lease, &info), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_time_to_live(db, lease, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_attach(NULL, lease, S("k")), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_attach(db, lease, NULL, 1), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_detach(NULL, lease, S("k")), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_detach(db, lease, NULL, 1), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_of(NULL, S("k"), &i64), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_of(db, NULL, 1, &i64), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_of(db, S("k"), NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_lease_checkpoint(NULL, lease, 1), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_leases(NULL, &ll), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_leases(db, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_promote(NULL, 0), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_demote(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_is_primary(NULL, &b), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_is_primary(db, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_expired_next(NULL, 0, &exp), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_expired_next(db, 0, NULL), TENURE_ERR_NULL_POINTER);

    /* transactions */
    CHECK_RC(tenure_txn_new(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_value(NULL, S("k"), TENURE_COMPARE_EQUAL, S("v")),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_value(txn, NULL, 1, TENURE_COMPARE_EQUAL, S("v")),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_value(txn, S("k"), TENURE_COMPARE_EQUAL, NULL, 1),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_version(NULL, S("k"), TENURE_COMPARE_EQUAL, 0),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_version(txn, NULL, 1, TENURE_COMPARE_EQUAL, 0),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_create_revision(NULL, S("k"), TENURE_COMPARE_EQUAL, 0),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_create_revision(txn, NULL, 1, TENURE_COMPARE_EQUAL, 0),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_mod_revision(NULL, S("k"), TENURE_COMPARE_EQUAL, 0),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_mod_revision(txn, NULL, 1, TENURE_COMPARE_EQUAL, 0),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_lease(NULL, S("k"), TENURE_COMPARE_EQUAL, 0),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_compare_lease(txn, NULL, 1, TENURE_COMPARE_EQUAL, 0),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_put(NULL, true, S("k"), S("v"), 0), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_put(txn, true, NULL, 1, S("v"), 0), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_put(txn, true, S("k"), NULL, 1, 0), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_get(NULL, true, S("k")), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_get(txn, true, NULL, 1), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_delete(NULL, true, S("k")), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_delete(txn, true, NULL, 1), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_delete_prefix(NULL, true, S("k")), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_delete_prefix(txn, true, NULL, 1), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_range(NULL, true, S("k"), 0), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_range(txn, true, NULL, 1, 0), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_commit(NULL, txn, &resp), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_commit(db, NULL, &resp), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_txn_commit(db, txn, NULL), TENURE_ERR_NULL_POINTER);

    /* watches */
    CHECK_RC(tenure_watch(NULL, S("k"), 0, 0, &w), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_watch(db, NULL, 1, 0, 0, &w), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_watch(db, S("k"), 0, 0, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_watcher_next(NULL, 0, &ev), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_watcher_next(w, 0, NULL), TENURE_ERR_NULL_POINTER);

    /* Out-parameters untouched, and nothing was done. */
    CHECK_EQ(i64, SENT);
    CHECK(kv == NULL && kvl == NULL && info == NULL && ll == NULL && exp == NULL);
    CHECK(resp == NULL && ev == NULL);
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.granted, 1);
    CHECK_EQ(s.keys, 0);
    CHECK_EQ(s.revision, 0);
    CHECK_EQ(s.revoked, 0);
    CHECK_EQ(s.renewed, 0);
    CHECK_EQ(s.leases, 1);
    /* The NULL compares and ops were not added: the empty txn succeeds and writes nothing. */
    CHECK_OK(tenure_txn_commit(db, txn, &resp));
    CHECK(tenure_txn_response_succeeded(resp));
    CHECK_EQ(tenure_txn_response_len(resp), 0);
    tenure_txn_response_free(resp);

    /* Out-parameters are never optional, and a NULL one stops the call before it acts. */
    CHECK_RC(tenure_put(db, S("k"), S("v"), lease, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_MSG("`out_revision`");
    CHECK_RC(tenure_lease_renew(db, lease, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_OK(tenure_put(db, S("k"), S("v"), lease, OUT_I64));
    CHECK_RC(tenure_delete(db, S("k"), NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_delete_prefix(db, S("k"), NULL), TENURE_ERR_NULL_POINTER);
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.keys, 1);
    CHECK_EQ(s.revision, 1);
    CHECK_EQ(s.renewed, 0);

    tenure_watcher_free(w);
    tenure_txn_free(txn);
    tenure_clock_free(clock);
    tenure_close(db);
}

static void free_and_close_of_null_are_no_ops(void) {
    tenure_close(NULL);
    tenure_free(NULL);
    tenure_clock_free(NULL);
    tenure_kv_free(NULL);
    tenure_kv_list_free(NULL);
    tenure_lease_info_free(NULL);
    tenure_lease_list_free(NULL);
    tenure_expired_free(NULL);
    tenure_txn_free(NULL);
    tenure_txn_response_free(NULL);
    tenure_watcher_free(NULL);
    tenure_event_free(NULL);
    CHECK(1); /* reaching here without a crash is the check */
}

static void accessors_of_null_objects_return_empty_values(void) {
    tenure_bytes none;
    none = tenure_kv_key(NULL);
    CHECK(none.data == NULL && none.len == 0);
    none = tenure_kv_value(NULL);
    CHECK(none.data == NULL && none.len == 0);
    CHECK_EQ(tenure_kv_create_revision(NULL), 0);
    CHECK_EQ(tenure_kv_mod_revision(NULL), 0);
    CHECK_EQ(tenure_kv_version(NULL), 0);
    CHECK_EQ(tenure_kv_lease(NULL), 0);
    CHECK_EQ(tenure_kv_list_len(NULL), 0);
    CHECK(tenure_kv_list_get(NULL, 0) == NULL);

    CHECK_EQ(tenure_lease_info_id(NULL), 0);
    CHECK_EQ(tenure_lease_info_ttl_ms(NULL), 0);
    CHECK_EQ(tenure_lease_info_remaining_ms(NULL), -1);
    CHECK_EQ(tenure_lease_info_key_count(NULL), 0);
    none = tenure_lease_info_key(NULL, 0);
    CHECK(none.data == NULL && none.len == 0);
    CHECK_EQ(tenure_lease_list_len(NULL), 0);
    CHECK(tenure_lease_list_get(NULL, 0) == NULL);

    CHECK_EQ(tenure_expired_len(NULL), 0);
    CHECK_EQ(tenure_expired_id(NULL, 0), 0);
    CHECK_EQ(tenure_expired_ttl_ms(NULL, 0), 0);
    CHECK_EQ(tenure_expired_key_count(NULL, 0), 0);
    none = tenure_expired_key(NULL, 0, 0);
    CHECK(none.data == NULL && none.len == 0);

    CHECK(!tenure_txn_response_succeeded(NULL));
    CHECK_EQ(tenure_txn_response_revision(NULL), 0);
    CHECK_EQ(tenure_txn_response_len(NULL), 0);
    CHECK_EQ(tenure_txn_response_op_type(NULL, 0), -1);
    CHECK_EQ(tenure_txn_response_op_revision(NULL, 0), 0);
    CHECK_EQ(tenure_txn_response_op_deleted(NULL, 0), 0);
    CHECK(tenure_txn_response_op_kvs(NULL, 0) == NULL);

    CHECK_EQ(tenure_event_type(NULL), -1);
    CHECK_EQ(tenure_event_revision(NULL), 0);
    CHECK(tenure_event_kv(NULL) == NULL);
    CHECK(tenure_event_prev_kv(NULL) == NULL);
}

static void manual_clock_refuses_negative_advance(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    CHECK_RC(tenure_clock_advance(clock, -1), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("must not be negative");
    CHECK_OK(tenure_clock_advance(clock, 0));
    CHECK_OK(tenure_clock_step_wall(clock, -100000));
    tenure_clock_free(clock);
}

static void a_rust_panic_becomes_tenure_err_panic_and_never_reaches_c(void) {
    fprintf(stderr, "(two deliberate panic messages follow)\n");
    CHECK_RC(tenure_test_panic(), TENURE_ERR_PANIC);
    CHECK_MSG("tenure_test_panic: panic: deliberate panic");
    CHECK_EQ(tenure_test_panic_value(), -1);
    CHECK_MSG("tenure_test_panic_value: panic:");
    /* The library keeps working after a caught panic. */
    tenure *db = open_memory(NULL);
    CHECK_OK(tenure_put(db, S("after"), S("panic"), 0, OUT_I64));
    tenure_close(db);
}

/* Reliability: sizes and durations are bounded where they enter (before: SIZE_MAX gave
 * TENURE_ERR_PANIC at the first watch, 1<<40 aborted the process, and a huge buffered interval
 * killed the commit thread so writes were acknowledged but never saved). */
static void huge_sizes_and_durations_are_invalid_arguments_at_open(void) {
    tenure_options o;
    tenure *db = (tenure *)(uintptr_t)0x1;
    tenure *const sentinel = db;
    const size_t sizes[] = {SIZE_MAX, (size_t)1 << 40, ((size_t)1 << 24) + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        tenure_options_init(&o);
        o.watch_queue = sizes[i];
        CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
        CHECK_MSG("watch_queue");
        tenure_options_init(&o);
        o.watch_history = sizes[i];
        CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
        CHECK_MSG("watch_history");
    }
    tenure_options_init(&o);
    o.durability = TENURE_DURABILITY_BUFFERED;
    o.flush_interval_ms = INT64_MAX;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("flush interval");
    tenure_options_init(&o);
    o.checkpoint_interval_ms = INT64_MAX;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    tenure_options_init(&o);
    o.recovery = TENURE_RECOVERY_EXTEND;
    o.extend_ms = INT64_MAX;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK(db == sentinel);

    /* The largest accepted queue costs nothing up front and works. */
    tenure_options_init(&o);
    o.watch_queue = (size_t)1 << 24;
    db = NULL;
    CHECK_OK(tenure_open(NULL, &o, &db));
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("k"), 0, 0, &w));
    tenure_watcher_free(w);
    tenure_close(db);
}

/* A manual clock saturates: advancing past its limit never makes time go backwards. */
static void manual_clock_saturates_at_its_limit(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure_options o;
    tenure_options_init(&o);
    o.clock = clock;
    tenure *db = NULL;
    CHECK_OK(tenure_open(NULL, &o, &db));
    int64_t lease = 0;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &lease));
    CHECK_OK(tenure_clock_advance(clock, 1000));
    CHECK_OK(tenure_clock_advance(clock, INT64_MAX));
    CHECK_OK(tenure_clock_advance(clock, INT64_MAX));
    CHECK_OK(tenure_clock_advance(clock, INT64_MAX));
    /* Had time wrapped around, the lease would be alive again. */
    tenure_result rc = tenure_lease_renew(db, lease, OUT_I64);
    CHECK(rc == TENURE_ERR_LEASE_NOT_FOUND || rc == TENURE_ERR_LEASE_EXPIRED);
    tenure_close(db);
    tenure_clock_free(clock);
}

/* R1/R3: tenure_connect checks its URL, reports an unreachable server as UNAVAILABLE within
 * its deadline, and writes nothing on failure. With TENURE_TEST_CONNECT_URL set (a running
 * `tenure serve` or etcd), it also makes a round trip and checks an engine-only call. */
static void connect_checks_urls_and_reports_unreachable_servers(void) {
    tenure *db = (tenure *)(uintptr_t)0x1;
    tenure *const sentinel = db;
    CHECK_RC(tenure_connect(NULL, NULL, &db), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_connect("http://127.0.0.1:1", NULL, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_connect("127.0.0.1:2379", NULL, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("http://");
    tenure_connect_options o = {0};
    o.request_timeout_ms = -5;
    CHECK_RC(tenure_connect("http://127.0.0.1:1", &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    o.request_timeout_ms = 300;
    /* Port 1 on loopback: nothing listens there. */
    CHECK_RC(tenure_connect("http://127.0.0.1:1", &o, &db), TENURE_ERR_UNAVAILABLE);
    CHECK(db == sentinel);

    /* R4/R5: TLS and credential options are checked before any connection is made. */
    o.cert_file = "client.pem";
    CHECK_RC(tenure_connect("https://127.0.0.1:1", &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("key_file");
    o.cert_file = NULL;
    o.user = "alice";
    CHECK_RC(tenure_connect("http://127.0.0.1:1", &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("password");
    o.user = NULL;
    o.ca_file = "ca.pem";
    CHECK_RC(tenure_connect("http://127.0.0.1:1", &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("https://");
    o.ca_file = "/nonexistent/ca.pem";
    CHECK_RC(tenure_connect("https://127.0.0.1:1", &o, &db), TENURE_ERR_STORAGE);
    CHECK_MSG("/nonexistent/ca.pem");
    o.ca_file = NULL;
    CHECK(db == sentinel);

    const char *url = getenv("TENURE_TEST_CONNECT_URL");
    if (url == NULL) return;
    CHECK_OK(tenure_connect(url, NULL, &db));
    int64_t rev = 0;
    CHECK_OK(tenure_put(db, (const uint8_t *)"c/k", 3, (const uint8_t *)"v", 1, 0, &rev));
    CHECK(rev > 0);
    CHECK_RC(tenure_promote(db, 0), TENURE_ERR_UNSUPPORTED);
    /* R1: no server says which leases expired: UNSUPPORTED naming the call, out untouched. */
    tenure_expired *ex = (tenure_expired *)(uintptr_t)0x1;
    CHECK_RC(tenure_expired_next(db, 0, &ex), TENURE_ERR_UNSUPPORTED);
    CHECK_MSG("expired");
    CHECK(ex == (tenure_expired *)(uintptr_t)0x1);
    tenure_close(db);
}

void api_tests(void) {
    RUN(connect_checks_urls_and_reports_unreachable_servers);
    RUN(version_string_matches_the_header_defines);
    RUN(result_str_names_every_code_and_unknown_numbers);
    RUN(last_error_message_is_per_thread_and_names_the_function);
    RUN(options_init_fills_the_documented_defaults);
    RUN(open_with_null_options_uses_the_defaults);
    RUN(bad_options_are_invalid_arguments_and_open_nothing);
    RUN(null_in_every_pointer_parameter_is_a_null_pointer_error);
    RUN(free_and_close_of_null_are_no_ops);
    RUN(accessors_of_null_objects_return_empty_values);
    RUN(manual_clock_refuses_negative_advance);
    RUN(a_rust_panic_becomes_tenure_err_panic_and_never_reaches_c);
    RUN(huge_sizes_and_durations_are_invalid_arguments_at_open);
    RUN(manual_clock_saturates_at_its_limit);
}
