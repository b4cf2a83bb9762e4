/* Expiry driven by a manual clock (SPEC L10-L12, L14): auto revoke, manual revoke with
 * redelivery, standby engines, wall-clock jumps. */
#include <stdlib.h>
#include <string.h>

#include "check.h"


static void auto_revoke_expires_at_the_deadline_with_keys(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    CHECK_OK(tenure_put(db, S("e/b"), S("2"), id, OUT_I64));
    CHECK_OK(tenure_put(db, S("e/a"), S("1"), id, OUT_I64));

    CHECK_OK(tenure_clock_advance(clock, 999));
    tenure_expired *e = (tenure_expired *)1;
    CHECK_RC(tenure_expired_next(db, 0, &e), TENURE_ERR_TIMEOUT);
    CHECK(e == (tenure_expired *)1);
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 1);
    tenure_lease_info_free(info);

    CHECK_OK(tenure_clock_advance(clock, 1));
    e = NULL;
    CHECK_OK(tenure_expired_next(db, WAIT_MS, &e));
    CHECK_EQ(tenure_expired_len(e), 1);
    CHECK_EQ(tenure_expired_id(e, 0), id);
    CHECK_EQ(tenure_expired_ttl_ms(e, 0), 1000);
    CHECK_EQ(tenure_expired_key_count(e, 0), 2);
    CHECK(bytes_eq(tenure_expired_key(e, 0, 0), "e/a"));
    CHECK(bytes_eq(tenure_expired_key(e, 0, 1), "e/b"));
    tenure_bytes none = tenure_expired_key(e, 0, 2);
    CHECK(none.data == NULL && none.len == 0);
    none = tenure_expired_key(e, 1, 0);
    CHECK(none.data == NULL && none.len == 0);
    CHECK_EQ(tenure_expired_id(e, 1), 0);
    CHECK_EQ(tenure_expired_ttl_ms(e, 1), 0);
    CHECK_EQ(tenure_expired_key_count(e, 1), 0);
    tenure_expired_free(e);

    /* Delivered after the revoke: the keys and the lease are gone. */
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_OK(tenure_get(db, S("e/a"), &kv));
    CHECK(kv == NULL);
    CHECK_RC(tenure_lease_renew(db, id, OUT_I64), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_RC(tenure_lease_time_to_live(db, id, &info), TENURE_ERR_LEASE_NOT_FOUND);
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.expired, 1);
    CHECK_EQ(s.leases, 0);
    CHECK_EQ(s.keys, 0);
    CHECK_RC(tenure_expired_next(db, 0, &e), TENURE_ERR_TIMEOUT);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void renew_before_the_deadline_postpones_expiry(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    CHECK_OK(tenure_clock_advance(clock, 800));
    CHECK_OK(tenure_lease_renew(db, id, OUT_I64));
    CHECK_OK(tenure_clock_advance(clock, 800)); /* 1600 > first deadline, < renewed one */
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 200);
    tenure_lease_info_free(info);
    CHECK_OK(tenure_clock_advance(clock, 200));
    tenure_expired *e = NULL;
    CHECK_OK(tenure_expired_next(db, WAIT_MS, &e));
    CHECK_EQ(tenure_expired_id(e, 0), id);
    tenure_expired_free(e);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void manual_revoke_holds_expired_leases_and_redelivers_them(void) {
    tenure_clock *clock = NULL;
    tenure_options o;
    tenure *db = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure_options_init(&o);
    o.clock = clock;
    o.auto_revoke = false;
    o.expired_retry_interval_ms = 3000;
    CHECK_OK(tenure_open(NULL, &o, &db));
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    CHECK_OK(tenure_put(db, S("m"), S("1"), id, OUT_I64));
    CHECK_OK(tenure_clock_advance(clock, 1000));

    tenure_expired *e = NULL;
    CHECK_OK(tenure_expired_next(db, WAIT_MS, &e));
    CHECK_EQ(tenure_expired_len(e), 1);
    CHECK_EQ(tenure_expired_id(e, 0), id);
    CHECK(bytes_eq(tenure_expired_key(e, 0, 0), "m")); /* what a revoke would delete */
    tenure_expired_free(e);
    /* Held for the application: the key stays, renew cannot bring it back. */
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("m"), &kv));
    CHECK(kv != NULL);
    tenure_kv_free(kv);
    CHECK_RC(tenure_lease_renew(db, id, OUT_I64), TENURE_ERR_LEASE_EXPIRED);
    CHECK_MSG("has expired");

    /* Not revoked within the retry interval: delivered again. */
    CHECK_OK(tenure_clock_advance(clock, 3000));
    CHECK_OK(tenure_expired_next(db, WAIT_MS, &e));
    CHECK_EQ(tenure_expired_id(e, 0), id);
    tenure_expired_free(e);

    CHECK_OK(tenure_lease_revoke(db, id));
    CHECK_OK(tenure_get(db, S("m"), &kv));
    CHECK(kv == NULL);
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.expired, 1); /* a redelivery is not counted again */
    tenure_close(db);
    tenure_clock_free(clock);
}

static void a_standby_never_expires_until_promoted(void) {
    tenure_clock *clock = NULL;
    tenure_options o;
    tenure *db = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure_options_init(&o);
    o.clock = clock;
    o.primary = false;
    CHECK_OK(tenure_open(NULL, &o, &db));
    bool primary = true;
    CHECK_OK(tenure_is_primary(db, &primary));
    CHECK(!primary);
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    CHECK_OK(tenure_clock_advance(clock, 60000));
    tenure_expired *e = NULL;
    CHECK_RC(tenure_expired_next(db, 0, &e), TENURE_ERR_TIMEOUT);
    CHECK_RC(tenure_lease_renew(db, id, OUT_I64), TENURE_ERR_NOT_PRIMARY);

    CHECK_OK(tenure_promote(db, 0));
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 1000);
    tenure_lease_info_free(info);
    CHECK_OK(tenure_clock_advance(clock, 1000));
    CHECK_OK(tenure_expired_next(db, WAIT_MS, &e));
    CHECK_EQ(tenure_expired_id(e, 0), id);
    tenure_expired_free(e);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void a_wall_clock_jump_moves_no_deadline(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    CHECK_OK(tenure_clock_step_wall(clock, 3600 * 1000));
    CHECK_OK(tenure_clock_step_wall(clock, -7200 * 1000));
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 1000);
    tenure_lease_info_free(info);
    CHECK_OK(tenure_lease_renew(db, id, OUT_I64));
    tenure_close(db);
    tenure_clock_free(clock);
}

static void the_clock_may_be_freed_before_the_engine(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    tenure_clock_free(clock);
    /* The engine keeps its own reference: time stands still, nothing expires. */
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 1000);
    tenure_lease_info_free(info);
    tenure_close(db);
}

/* SPEC L16: the expiry lands in the lateness histogram of the Prometheus text. */
static void l16_metrics_text_shows_an_expiry_and_its_lateness(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    /* Found due 300 ms after its deadline. */
    CHECK_OK(tenure_clock_advance(clock, 1300));
    tenure_expired *e = NULL;
    CHECK_OK(tenure_expired_next(db, WAIT_MS, &e));
    tenure_expired_free(e);

    char small[16];
    size_t n = 12345;
    CHECK_RC(tenure_metrics_prometheus(db, small, sizeof small, &n), TENURE_ERR_INVALID_ARGUMENT);
    CHECK(n > sizeof small); /* the size needed, NUL included */
    size_t needed = n;
    CHECK(strstr(tenure_last_error_message(), "the text needs") != NULL);
    CHECK_RC(tenure_metrics_prometheus(db, NULL, 0, &n), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_metrics_prometheus(db, small, sizeof small, NULL), TENURE_ERR_NULL_POINTER);

    size_t cap = 1 << 16;
    char *text = malloc(cap);
    CHECK(text != NULL);
    CHECK_OK(tenure_metrics_prometheus(db, text, cap, &n));
    CHECK(n == strlen(text));
    CHECK(n + 1 == needed);
    CHECK(strstr(text, "tenure_leases_expired_total 1\n") != NULL);
    CHECK(strstr(text, "tenure_expiry_lateness_seconds_bucket{le=\"0.25\"} 0\n") != NULL);
    CHECK(strstr(text, "tenure_expiry_lateness_seconds_bucket{le=\"0.5\"} 1\n") != NULL);
    CHECK(strstr(text, "tenure_expiry_lateness_seconds_count 1\n") != NULL);
    free(text);
    tenure_close(db);
    tenure_clock_free(clock);
}

void expiry_tests(void) {
    RUN(l16_metrics_text_shows_an_expiry_and_its_lateness);
    RUN(auto_revoke_expires_at_the_deadline_with_keys);
    RUN(renew_before_the_deadline_postpones_expiry);
    RUN(manual_revoke_holds_expired_leases_and_redelivers_them);
    RUN(a_standby_never_expires_until_promoted);
    RUN(a_wall_clock_jump_moves_no_deadline);
    RUN(the_clock_may_be_freed_before_the_engine);
}
