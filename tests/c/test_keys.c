/* Keys through the C API (SPEC K1-K5): put/get/delete/range with revisions, zero and huge
 * lengths, binary keys, large values, and transactions. */
#include <stdlib.h>

#include "check.h"

static void put_and_get_track_revisions_versions_and_leases(void) {
    tenure *db = open_memory(NULL);
    int64_t r1 = 0, r2 = 0, lease = 0;
    CHECK_OK(tenure_put(db, S("k"), S("v1"), 0, &r1));
    CHECK_EQ(r1, 1);
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &lease));
    CHECK_OK(tenure_put(db, S("k"), S("v2"), lease, &r2));
    CHECK_EQ(r2, 2);

    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("k"), &kv));
    CHECK(kv != NULL);
    CHECK(bytes_eq(tenure_kv_key(kv), "k"));
    CHECK(bytes_eq(tenure_kv_value(kv), "v2"));
    CHECK_EQ(tenure_kv_create_revision(kv), 1);
    CHECK_EQ(tenure_kv_mod_revision(kv), 2);
    CHECK_EQ(tenure_kv_version(kv), 2);
    CHECK_EQ(tenure_kv_lease(kv), lease);
    tenure_kv_free(kv);

    /* Put without a lease detaches. */
    CHECK_OK(tenure_put(db, S("k"), S("v3"), 0, OUT_I64));
    CHECK_OK(tenure_get(db, S("k"), &kv));
    CHECK_EQ(tenure_kv_lease(kv), 0);
    CHECK_EQ(tenure_kv_version(kv), 3);
    tenure_kv_free(kv);

    /* Absent keys: OK with *out = NULL (written, since the call succeeded). */
    kv = (tenure_kv *)1;
    CHECK_OK(tenure_get(db, S("nope"), &kv));
    CHECK(kv == NULL);
    kv = (tenure_kv *)1;
    CHECK_OK(tenure_get(db, NULL, 0, &kv));
    CHECK(kv == NULL);

    int64_t rev = 0;
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_EQ(rev, 3);
    tenure_close(db);
}

static void put_with_unknown_lease_writes_nothing(void) {
    tenure *db = open_memory(NULL);
    int64_t rev = -1;
    CHECK_RC(tenure_put(db, S("k"), S("v"), 4040, &rev), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_MSG("lease 4040 not found");
    CHECK_EQ(rev, -1);
    CHECK_RC(tenure_put(db, S("k"), S("v"), -2, &rev), TENURE_ERR_LEASE_NOT_FOUND);
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("k"), &kv));
    CHECK(kv == NULL);
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_EQ(rev, 0);
    tenure_close(db);
}

static void zero_lengths_empty_keys_and_huge_lengths(void) {
    tenure *db = open_memory(NULL);
    /* Empty value, NULL pointer: fine. */
    CHECK_OK(tenure_put(db, S("empty"), NULL, 0, 0, OUT_I64));
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("empty"), &kv));
    CHECK(kv != NULL);
    CHECK_EQ(tenure_kv_value(kv).len, 0);
    tenure_kv_free(kv);

    /* Empty keys are refused where a key is written. */
    CHECK_RC(tenure_put(db, NULL, 0, S("v"), 0, OUT_I64), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("key must not be empty");
    CHECK_RC(tenure_put(db, (const uint8_t *)"x", 0, S("v"), 0, OUT_I64),
             TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_delete(db, NULL, 0, OUT_BOOL), TENURE_ERR_INVALID_ARGUMENT);

    /* Lengths no buffer can have are refused before anything is read. */
    const uint8_t small[1] = {'k'};
    CHECK_RC(tenure_put(db, small, SIZE_MAX, S("v"), 0, OUT_I64), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("larger than PTRDIFF_MAX");
    CHECK_RC(tenure_put(db, S("k"), small, SIZE_MAX, 0, OUT_I64), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_put(db, small, (SIZE_MAX >> 1) + 1, S("v"), 0, OUT_I64),
             TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_get(db, small, SIZE_MAX, &kv), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_delete(db, small, SIZE_MAX, OUT_BOOL), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_delete_prefix(db, small, SIZE_MAX, OUT_U64), TENURE_ERR_INVALID_ARGUMENT);
    tenure_kv_list *l = NULL;
    CHECK_RC(tenure_range(db, small, SIZE_MAX, 0, &l), TENURE_ERR_INVALID_ARGUMENT);
    CHECK(l == NULL);
    int64_t id = 0;
    CHECK_RC(tenure_lease_of(db, small, SIZE_MAX, &id), TENURE_ERR_INVALID_ARGUMENT);
    tenure_watcher *w = NULL;
    CHECK_RC(tenure_watch(db, small, SIZE_MAX, 0, 0, &w), TENURE_ERR_INVALID_ARGUMENT);
    CHECK(w == NULL);

    int64_t rev = -1;
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_EQ(rev, 1);
    tenure_close(db);
}

static void keys_and_values_are_arbitrary_bytes(void) {
    tenure *db = open_memory(NULL);
    const uint8_t key[] = {0x00, 0xff, 0x00, 'k', 0x80};
    const uint8_t val[] = {0x00, 0x00, 0xfe};
    CHECK_OK(tenure_put(db, key, sizeof key, val, sizeof val, 0, OUT_I64));
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, key, sizeof key, &kv));
    tenure_bytes k = tenure_kv_key(kv), v = tenure_kv_value(kv);
    CHECK(k.len == sizeof key && memcmp(k.data, key, sizeof key) == 0);
    CHECK(v.len == sizeof val && memcmp(v.data, val, sizeof val) == 0);
    tenure_kv_free(kv);
    /* A prefix of the key is a different key. */
    CHECK_OK(tenure_get(db, key, 3, &kv));
    CHECK(kv == NULL);
    tenure_close(db);
}

static void large_values_round_trip(void) {
    tenure *db = open_memory(NULL);
    size_t n = 4u << 20;
    uint8_t *big = malloc(n);
    CHECK(big != NULL);
    for (size_t i = 0; i < n; i++) big[i] = (uint8_t)(i * 31u + 7u);
    CHECK_OK(tenure_put(db, S("big"), big, n, 0, OUT_I64));
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("big"), &kv));
    tenure_bytes v = tenure_kv_value(kv);
    CHECK(v.len == n && memcmp(v.data, big, n) == 0);
    tenure_kv_free(kv);
    free(big);
    tenure_close(db);
}

static void delete_and_delete_prefix_report_what_they_removed(void) {
    tenure *db = open_memory(NULL);
    CHECK_OK(tenure_put(db, S("a/1"), S("1"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("a/2"), S("2"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("b/1"), S("3"), 0, OUT_I64));
    bool deleted = false;
    CHECK_OK(tenure_delete(db, S("a/1"), &deleted));
    CHECK(deleted);
    CHECK_OK(tenure_delete(db, S("a/1"), &deleted));
    CHECK(!deleted);
    uint64_t n = 99;
    CHECK_OK(tenure_delete_prefix(db, S("a/"), &n));
    CHECK_EQ(n, 1);
    CHECK_OK(tenure_delete_prefix(db, S("zzz"), &n));
    CHECK_EQ(n, 0);
    CHECK_OK(tenure_put(db, S("c"), S("4"), 0, OUT_I64));
    /* The empty prefix is every key. */
    CHECK_OK(tenure_delete_prefix(db, NULL, 0, &n));
    CHECK_EQ(n, 2);
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.keys, 0);
    tenure_close(db);
}

static void range_returns_keys_in_order_with_a_limit(void) {
    tenure *db = open_memory(NULL);
    CHECK_OK(tenure_put(db, S("p/c"), S("3"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("p/a"), S("1"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("p/b"), S("2"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("q"), S("x"), 0, OUT_I64));
    tenure_kv_list *l = NULL;
    CHECK_OK(tenure_range(db, S("p/"), 0, &l));
    CHECK_EQ(tenure_kv_list_len(l), 3);
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(l, 0)), "p/a"));
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(l, 1)), "p/b"));
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(l, 2)), "p/c"));
    CHECK(bytes_eq(tenure_kv_value(tenure_kv_list_get(l, 2)), "3"));
    CHECK(tenure_kv_list_get(l, 3) == NULL);
    tenure_kv_list_free(l);

    CHECK_OK(tenure_range(db, S("p/"), 2, &l));
    CHECK_EQ(tenure_kv_list_len(l), 2);
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(l, 1)), "p/b"));
    tenure_kv_list_free(l);

    CHECK_OK(tenure_range(db, NULL, 0, SIZE_MAX, &l));
    CHECK_EQ(tenure_kv_list_len(l), 4);
    tenure_kv_list_free(l);

    CHECK_OK(tenure_range(db, S("none/"), 0, &l));
    CHECK(l != NULL);
    CHECK_EQ(tenure_kv_list_len(l), 0);
    tenure_kv_list_free(l);
    tenure_close(db);
}

/* ---- transactions (K5) ------------------------------------------------------------------- */

static void txn_create_if_absent_runs_success_then_failure_branch(void) {
    tenure *db = open_memory(NULL);
    tenure_txn *txn = NULL;
    CHECK_OK(tenure_txn_new(&txn));
    CHECK_OK(tenure_txn_compare_version(txn, S("lock"), TENURE_COMPARE_EQUAL, 0));
    CHECK_OK(tenure_txn_put(txn, true, S("lock"), S("me"), 0));
    CHECK_OK(tenure_txn_get(txn, false, S("lock")));

    tenure_txn_response *r = NULL;
    CHECK_OK(tenure_txn_commit(db, txn, &r));
    CHECK(tenure_txn_response_succeeded(r));
    CHECK_EQ(tenure_txn_response_revision(r), 1);
    CHECK_EQ(tenure_txn_response_len(r), 1);
    CHECK_EQ(tenure_txn_response_op_type(r, 0), TENURE_OP_PUT);
    CHECK_EQ(tenure_txn_response_op_revision(r, 0), 1);
    CHECK(tenure_txn_response_op_kvs(r, 0) == NULL);
    tenure_txn_response_free(r);

    /* Committing the same txn again: the key exists now, the failure branch reads it. */
    CHECK_OK(tenure_txn_commit(db, txn, &r));
    CHECK(!tenure_txn_response_succeeded(r));
    CHECK_EQ(tenure_txn_response_revision(r), 1); /* nothing written */
    CHECK_EQ(tenure_txn_response_len(r), 1);
    CHECK_EQ(tenure_txn_response_op_type(r, 0), TENURE_OP_GET);
    const tenure_kv_list *got = tenure_txn_response_op_kvs(r, 0);
    CHECK_EQ(tenure_kv_list_len(got), 1);
    CHECK(bytes_eq(tenure_kv_value(tenure_kv_list_get(got, 0)), "me"));
    /* Out of range. */
    CHECK_EQ(tenure_txn_response_op_type(r, 1), -1);
    CHECK_EQ(tenure_txn_response_op_revision(r, 1), 0);
    CHECK_EQ(tenure_txn_response_op_deleted(r, 1), 0);
    CHECK(tenure_txn_response_op_kvs(r, 1) == NULL);
    tenure_txn_response_free(r);
    tenure_txn_free(txn);
    tenure_close(db);
}

static void txn_compares_every_field_with_every_op(void) {
    tenure *db = open_memory(NULL);
    int64_t lease = 0;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &lease));
    CHECK_OK(tenure_put(db, S("k"), S("m"), lease, OUT_I64)); /* rev 1 */
    CHECK_OK(tenure_put(db, S("k"), S("m"), lease, OUT_I64)); /* rev 2, version 2 */
    struct {
        int field; /* 0 value, 1 version, 2 create, 3 mod, 4 lease */
        tenure_compare_op op;
        int64_t n;
        const char *v;
        bool want;
    } cases[] = {
        {0, TENURE_COMPARE_EQUAL, 0, "m", true},     {0, TENURE_COMPARE_LESS, 0, "n", true},
        {0, TENURE_COMPARE_GREATER, 0, "a", true},   {0, TENURE_COMPARE_NOT_EQUAL, 0, "m", false},
        {1, TENURE_COMPARE_EQUAL, 2, NULL, true},    {1, TENURE_COMPARE_GREATER, 2, NULL, false},
        {2, TENURE_COMPARE_EQUAL, 1, NULL, true},    {2, TENURE_COMPARE_LESS, 2, NULL, true},
        {3, TENURE_COMPARE_EQUAL, 2, NULL, true},    {3, TENURE_COMPARE_NOT_EQUAL, 2, NULL, false},
        {4, TENURE_COMPARE_EQUAL, lease, NULL, true}, {4, TENURE_COMPARE_EQUAL, 0, NULL, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tenure_txn *txn = NULL;
        CHECK_OK(tenure_txn_new(&txn));
        switch (cases[i].field) {
        case 0: CHECK_OK(tenure_txn_compare_value(txn, S("k"), cases[i].op, S(cases[i].v))); break;
        case 1: CHECK_OK(tenure_txn_compare_version(txn, S("k"), cases[i].op, cases[i].n)); break;
        case 2:
            CHECK_OK(tenure_txn_compare_create_revision(txn, S("k"), cases[i].op, cases[i].n));
            break;
        case 3:
            CHECK_OK(tenure_txn_compare_mod_revision(txn, S("k"), cases[i].op, cases[i].n));
            break;
        default: CHECK_OK(tenure_txn_compare_lease(txn, S("k"), cases[i].op, cases[i].n)); break;
        }
        tenure_txn_response *r = NULL;
        CHECK_OK(tenure_txn_commit(db, txn, &r));
        if (tenure_txn_response_succeeded(r) != cases[i].want) {
            fprintf(stderr, "  compare case %zu\n", i);
        }
        CHECK(tenure_txn_response_succeeded(r) == cases[i].want);
        tenure_txn_response_free(r);
        tenure_txn_free(txn);
    }
    /* A value compare on a missing key never holds. */
    tenure_txn *txn = NULL;
    tenure_txn_response *r = NULL;
    CHECK_OK(tenure_txn_new(&txn));
    CHECK_OK(tenure_txn_compare_value(txn, S("missing"), TENURE_COMPARE_NOT_EQUAL, S("x")));
    CHECK_OK(tenure_txn_commit(db, txn, &r));
    CHECK(!tenure_txn_response_succeeded(r));
    tenure_txn_response_free(r);
    /* Unknown compare ops are refused when added. */
    CHECK_RC(tenure_txn_compare_version(txn, S("k"), 4, 0), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("unknown compare op 4");
    CHECK_RC(tenure_txn_compare_value(txn, S("k"), -1, S("v")), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_txn_compare_create_revision(txn, S("k"), 99, 0), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_txn_compare_mod_revision(txn, S("k"), 99, 0), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_txn_compare_lease(txn, S("k"), 99, 0), TENURE_ERR_INVALID_ARGUMENT);
    tenure_txn_free(txn);
    tenure_close(db);
}

static void txn_runs_every_op_kind_at_one_revision(void) {
    tenure *db = open_memory(NULL);
    CHECK_OK(tenure_put(db, S("d/1"), S("1"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("d/2"), S("2"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("single"), S("s"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("r/a"), S("a"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("r/b"), S("b"), 0, OUT_I64)); /* rev 5 */
    tenure_txn *txn = NULL;
    CHECK_OK(tenure_txn_new(&txn));
    CHECK_OK(tenure_txn_put(txn, true, S("new"), NULL, 0, 0));
    CHECK_OK(tenure_txn_delete(txn, true, S("single")));
    CHECK_OK(tenure_txn_delete(txn, true, S("absent")));
    CHECK_OK(tenure_txn_delete_prefix(txn, true, S("d/")));
    CHECK_OK(tenure_txn_range(txn, true, S("r/"), 1));
    CHECK_OK(tenure_txn_range(txn, true, S("r/"), 0));
    CHECK_OK(tenure_txn_get(txn, true, S("absent")));
    CHECK_OK(tenure_txn_put(txn, false, S("never"), S("x"), 0));

    tenure_txn_response *r = NULL;
    CHECK_OK(tenure_txn_commit(db, txn, &r));
    CHECK(tenure_txn_response_succeeded(r));
    CHECK_EQ(tenure_txn_response_revision(r), 6);
    CHECK_EQ(tenure_txn_response_len(r), 7);
    CHECK_EQ(tenure_txn_response_op_type(r, 0), TENURE_OP_PUT);
    CHECK_EQ(tenure_txn_response_op_revision(r, 0), 6);
    CHECK_EQ(tenure_txn_response_op_type(r, 1), TENURE_OP_DELETE);
    CHECK_EQ(tenure_txn_response_op_deleted(r, 1), 1);
    CHECK_EQ(tenure_txn_response_op_deleted(r, 2), 0);
    CHECK_EQ(tenure_txn_response_op_type(r, 3), TENURE_OP_DELETE_PREFIX);
    CHECK_EQ(tenure_txn_response_op_deleted(r, 3), 2);
    CHECK_EQ(tenure_txn_response_op_type(r, 4), TENURE_OP_RANGE);
    CHECK_EQ(tenure_kv_list_len(tenure_txn_response_op_kvs(r, 4)), 1);
    const tenure_kv_list *all = tenure_txn_response_op_kvs(r, 5);
    CHECK_EQ(tenure_kv_list_len(all), 2);
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(all, 1)), "r/b"));
    CHECK_EQ(tenure_txn_response_op_type(r, 6), TENURE_OP_GET);
    CHECK_EQ(tenure_kv_list_len(tenure_txn_response_op_kvs(r, 6)), 0);
    tenure_txn_response_free(r);
    tenure_txn_free(txn);

    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("never"), &kv));
    CHECK(kv == NULL);
    CHECK_OK(tenure_get(db, S("new"), &kv));
    CHECK_EQ(tenure_kv_mod_revision(kv), 6);
    tenure_kv_free(kv);
    tenure_close(db);
}

static void txn_with_a_bad_op_fails_whole_and_writes_nothing(void) {
    tenure *db = open_memory(NULL);
    tenure_txn *txn = NULL;
    tenure_txn_response *r = NULL;
    CHECK_OK(tenure_txn_new(&txn));
    CHECK_OK(tenure_txn_put(txn, true, S("ok"), S("1"), 0));
    CHECK_OK(tenure_txn_put(txn, true, NULL, 0, S("2"), 0)); /* empty key: checked at commit */
    CHECK_RC(tenure_txn_commit(db, txn, &r), TENURE_ERR_INVALID_ARGUMENT);
    CHECK(r == NULL);
    tenure_txn_free(txn);

    CHECK_OK(tenure_txn_new(&txn));
    CHECK_OK(tenure_txn_put(txn, true, S("ok"), S("1"), 0));
    CHECK_OK(tenure_txn_put(txn, true, S("leased"), S("2"), 8888));
    CHECK_RC(tenure_txn_commit(db, txn, &r), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_MSG("8888");
    tenure_txn_free(txn);

    int64_t rev = -1;
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_EQ(rev, 0);
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("ok"), &kv));
    CHECK(kv == NULL);
    tenure_close(db);
}

void key_tests(void) {
    RUN(put_and_get_track_revisions_versions_and_leases);
    RUN(put_with_unknown_lease_writes_nothing);
    RUN(zero_lengths_empty_keys_and_huge_lengths);
    RUN(keys_and_values_are_arbitrary_bytes);
    RUN(large_values_round_trip);
    RUN(delete_and_delete_prefix_report_what_they_removed);
    RUN(range_returns_keys_in_order_with_a_limit);
}

void txn_tests(void) {
    RUN(txn_create_if_absent_runs_success_then_failure_branch);
    RUN(txn_compares_every_field_with_every_op);
    RUN(txn_runs_every_op_kind_at_one_revision);
    RUN(txn_with_a_bad_op_fails_whole_and_writes_nothing);
}
