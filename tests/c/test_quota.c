/* The space quota and the alarms through the C API (SPEC E20, E24, E25): fill past a small
 * quota, get TENURE_ERR_QUOTA_EXCEEDED and the NOSPACE alarm (also in the Prometheus text),
 * compact, defragment and disarm, and write again. */
#include <stdlib.h>

#include "check.h"

#define MEMBER 0x51ab
#define VALUE_BYTES (16 * 1024)

static const tenure_alarm NOSPACE = {MEMBER, TENURE_ALARM_NOSPACE};

static tenure *open_quota(const char *path, uint64_t quota) {
    tenure_options o;
    CHECK_OK(tenure_options_init(&o));
    CHECK_EQ(o.quota_backend_bytes, 0);
    CHECK_EQ(o.member_id, 0);
    o.quota_backend_bytes = quota;
    o.member_id = MEMBER;
    tenure *db = NULL;
    CHECK_OK(tenure_open(path, &o, &db));
    return db;
}

/* The value of the line `name value` of `db`'s Prometheus text, or -1. */
static long long figure(const tenure *db, const char *name) {
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    long long v = -1;
    CHECK(text != NULL);
    CHECK_OK(tenure_metrics_prometheus(db, text, cap, &n));
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *at = strstr(text, needle);
    if (at != NULL) v = strtoll(at + strlen(needle), NULL, 10);
    free(text);
    return v;
}

static void e25_a_write_past_the_quota_raises_nospace_and_compact_defragment_disarm_recover(void) {
    char path[512];
    test_path(path, sizeof path, "quota-probe.tenure");
    tenure *probe = open_quota(path, 0);
    tenure_storage_size empty;
    CHECK_OK(tenure_storage_size_read(probe, &empty));
    uint64_t none = 1;
    CHECK_OK(tenure_quota_backend_bytes(probe, &none));
    CHECK_EQ(none, 0);
    CHECK_EQ(figure(probe, "etcd_server_quota_backend_bytes"), 0);
    tenure_close(probe);

    const uint64_t quota = empty.file_bytes + (1 << 20);
    test_path(path, sizeof path, "quota.tenure");
    tenure *db = open_quota(path, quota);
    uint64_t got = 0;
    CHECK_OK(tenure_quota_backend_bytes(db, &got));
    CHECK_EQ(got, quota);
    CHECK_OK(tenure_member_id(db, &got));
    CHECK_EQ(got, MEMBER);
    CHECK_EQ(figure(db, "etcd_server_quota_backend_bytes"), (long long)quota);
    CHECK_EQ(figure(db, "tenure_server_alarm_nospace"), 0);
    size_t n = 99;
    CHECK_OK(tenure_alarms(db, NULL, 0, &n));
    CHECK_EQ(n, 0);

    char *value = malloc(VALUE_BYTES);
    CHECK(value != NULL);
    memset(value, 'x', VALUE_BYTES);
    char key[32];
    int written = 0;
    tenure_result rc = TENURE_OK;
    for (; written < 4096; written++) {
        snprintf(key, sizeof key, "fill/%05d", written);
        rc = tenure_put(db, S(key), (const uint8_t *)value, VALUE_BYTES, 0, OUT_I64);
        if (rc != TENURE_OK) break;
    }
    CHECK(written > 0);
    CHECK_EQ(rc, TENURE_ERR_QUOTA_EXCEEDED);
    CHECK_MSG("NOSPACE alarm");

    tenure_alarm alarms[2];
    memset(alarms, 0, sizeof alarms);
    CHECK_OK(tenure_alarms(db, alarms, 2, &n));
    CHECK_EQ(n, 1);
    CHECK_EQ(alarms[0].member, MEMBER);
    CHECK_EQ(alarms[0].kind, TENURE_ALARM_NOSPACE);
    CHECK_EQ(figure(db, "tenure_server_alarm_nospace"), 1);
    /* Under NOSPACE even a tiny put or a grant is refused; a delete is not. */
    CHECK_RC(tenure_put(db, S("tiny"), S(""), 0, OUT_I64), TENURE_ERR_QUOTA_EXCEEDED);
    CHECK_RC(tenure_lease_grant(db, 5000, 0, OUT_I64), TENURE_ERR_QUOTA_EXCEEDED);

    /* Recovery as on etcd: delete, compact, defragment, disarm. */
    uint64_t deleted = 0;
    CHECK_OK(tenure_delete_prefix(db, S("fill/"), &deleted));
    CHECK_EQ(deleted, written);
    int64_t rev = 0;
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_OK(tenure_compact(db, rev, true));
    tenure_storage_size size;
    CHECK_OK(tenure_defragment(db, &size));
    CHECK(size.file_bytes < quota - 4 * VALUE_BYTES);
    CHECK(size.in_use_bytes <= size.file_bytes);
    tenure_storage_size again;
    CHECK_OK(tenure_storage_size_read(db, &again));
    CHECK_EQ(again.file_bytes, size.file_bytes);
    bool changed = false;
    CHECK_OK(tenure_alarm_disarm(db, NOSPACE, &changed));
    CHECK(changed);
    CHECK_OK(tenure_alarm_disarm(db, NOSPACE, &changed));
    CHECK(!changed);
    CHECK_OK(tenure_alarms(db, alarms, 2, &n));
    CHECK_EQ(n, 0);
    CHECK_EQ(figure(db, "tenure_server_alarm_nospace"), 0);
    CHECK_OK(tenure_put(db, S("again"), (const uint8_t *)value, VALUE_BYTES, 0, OUT_I64));
    CHECK_OK(tenure_lease_grant(db, 5000, 0, OUT_I64));
    free(value);
    tenure_close(db);
}

static void e25_alarms_raise_and_disarm_and_a_small_array_gets_the_count_needed(void) {
    tenure *db = open_memory(NULL);
    const tenure_alarm corrupt = {7, TENURE_ALARM_CORRUPT};
    bool changed = false;
    CHECK_OK(tenure_alarm_raise(db, corrupt, &changed));
    CHECK(changed);
    CHECK_OK(tenure_alarm_raise(db, corrupt, &changed));
    CHECK(!changed);
    /* CORRUPT refuses every write and lets reads through. */
    CHECK_RC(tenure_put(db, S("k"), S("v"), 0, OUT_I64), TENURE_ERR_UNAVAILABLE);
    CHECK_MSG("corrupt cluster");
    CHECK_OK(tenure_revision(db, OUT_I64));
    CHECK_OK(tenure_alarm_raise(db, NOSPACE, &changed));

    tenure_alarm one[1];
    memset(one, 0, sizeof one);
    size_t n = 0;
    CHECK_RC(tenure_alarms(db, one, 1, &n), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_EQ(n, 2);
    CHECK_EQ(one[0].kind, 0); /* nothing written */
    CHECK_RC(tenure_alarms(db, NULL, 1, &n), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_alarms(db, one, 1, NULL), TENURE_ERR_NULL_POINTER);
    tenure_alarm two[2];
    CHECK_OK(tenure_alarms(db, two, 2, &n));
    CHECK_EQ(n, 2);
    /* In (kind, member) order: NOSPACE (1) first. */
    CHECK_EQ(two[0].kind, TENURE_ALARM_NOSPACE);
    CHECK_EQ(two[0].member, MEMBER);
    CHECK_EQ(two[1].kind, TENURE_ALARM_CORRUPT);
    CHECK_EQ(two[1].member, 7);

    const tenure_alarm unknown = {1, 3};
    CHECK_RC(tenure_alarm_raise(db, unknown, &changed), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("unknown alarm kind 3");
    CHECK_RC(tenure_alarm_disarm(db, unknown, &changed), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_alarm_raise(db, corrupt, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_OK(tenure_alarm_disarm(db, corrupt, &changed));
    CHECK(changed);
    CHECK_OK(tenure_alarm_disarm(db, NOSPACE, &changed));
    CHECK_OK(tenure_put(db, S("k"), S("v"), 0, OUT_I64));
    /* In memory there is no file to defragment or measure. */
    tenure_storage_size size;
    CHECK_RC(tenure_defragment(db, &size), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("in-memory database has no file");
    tenure_close(db);
}

void quota_tests(void) {
    RUN(e25_a_write_past_the_quota_raises_nospace_and_compact_defragment_disarm_recover);
    RUN(e25_alarms_raise_and_disarm_and_a_small_array_gets_the_count_needed);
}
