/* A tiny test harness for the C tests of libtenure: CHECK* macros print file:line on failure
 * and count into per-test-case tallies (atomically: worker threads may check too). */
#ifndef TENURE_CHECK_H
#define TENURE_CHECK_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tenure.h"

extern atomic_int check_failures; /* failed checks in the current test case */
extern atomic_long check_count;   /* checks run in total */

#define CHECK(cond)                                                                 \
    do {                                                                            \
        atomic_fetch_add(&check_count, 1);                                          \
        if (!(cond)) {                                                              \
            atomic_fetch_add(&check_failures, 1);                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

/* Checks that `expr` returns `want`; on failure shows both names and the error message. */
#define CHECK_RC(expr, want)                                                              \
    do {                                                                                  \
        tenure_result rc_ = (expr);                                                       \
        tenure_result want_ = (want);                                                     \
        atomic_fetch_add(&check_count, 1);                                                \
        if (rc_ != want_) {                                                               \
            atomic_fetch_add(&check_failures, 1);                                         \
            fprintf(stderr, "%s:%d: %s\n    returned %s (%d), want %s: %s\n", __FILE__,   \
                    __LINE__, #expr, tenure_result_str(rc_), (int)rc_,                    \
                    tenure_result_str(want_), tenure_last_error_message());               \
        }                                                                                 \
    } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, TENURE_OK)

/* Integer equality with both values printed. */
#define CHECK_EQ(a, b)                                                                  \
    do {                                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);                             \
        atomic_fetch_add(&check_count, 1);                                              \
        if (a_ != b_) {                                                                 \
            atomic_fetch_add(&check_failures, 1);                                       \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld != %lld)\n",        \
                    __FILE__, __LINE__, #a, #b, a_, b_);                                \
        }                                                                               \
    } while (0)

/* The last error message on this thread contains `needle`. */
#define CHECK_MSG(needle) CHECK(strstr(tenure_last_error_message(), (needle)) != NULL)

/* Throwaway out-parameters, for calls whose output a test does not look at (every
 * out-parameter is required). */
#define OUT_I64 (&(int64_t){0})
#define OUT_U64 (&(uint64_t){0})
#define OUT_BOOL (&(bool){false})

/* A C string as a (const uint8_t *, size_t) pair of arguments. */
/* The bound on a wait for something that happens at once or at a known real-time moment. A
 * wait returns as soon as its event arrives, so the bound costs nothing when all is well; it is
 * generous because valgrind runs every thread on one core, ~30x slower, on a loaded CI machine. */
#define WAIT_MS 60000

#define S(str) (const uint8_t *)(str), strlen(str)

/* Whether a borrowed byte string equals a C string. */
static inline int bytes_eq(tenure_bytes b, const char *s) {
    size_t n = strlen(s);
    return b.len == n && (n == 0 || (b.data != NULL && memcmp(b.data, s, n) == 0));
}

/* A fresh in-memory engine with defaults, or a manual clock when `clock` is non-NULL. */
tenure *open_memory(const tenure_clock *clock);

/* A session with a 60 s lease; closing (revoking) and freeing one. */
tenure_session *new_session(tenure *db);
void end_session(tenure_session *s);

/* A fresh directory for database files (removed by the runner at exit), and a path in it. */
const char *test_dir(void);
void test_path(char *buf, size_t size, const char *name);

/* Test groups, one per file. Each registers its cases with RUN(). */
typedef void (*test_fn)(void);
void run_case(const char *name, test_fn fn);
#define RUN(fn) run_case(#fn, fn)

void api_tests(void);
void lease_tests(void);
void key_tests(void);
void txn_tests(void);
void history_tests(void);
void watch_tests(void);
void expiry_tests(void);
void file_tests(void);
void thread_tests(void);
void closed_tests(void);
void sync_tests(void);
void election_tests(void);
void message_tests(void);
void backup_tests(void);
/* Queues, barriers, groups (S10–S12) */
void queue_tests(void);
void barrier_tests(void);
void group_tests(void);
/* Several processes on one file (SPEC P18-P21); the entry of its child processes. */
void shared_tests(void);
int shared_child_main(int argc, char **argv);
/* The path the children are started from: argv[0] when it names a path (under valgrind
 * /proc/self/exe is valgrind itself), else /proc/self/exe. Set by main. */
extern const char *test_binary;
/* Quota and alarms (E20, E25) */
void quota_tests(void);

#endif
