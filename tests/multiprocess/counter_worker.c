/* A worker of the multi-process counter test (run.py), the twin of counter_worker.py:
 *
 *     counter-worker DB COUNTER LOCK TTL_MS
 *
 * Opens DB with `shared` and loops: lock LOCK (a session of TTL_MS), read "COUNT TOKEN" from
 * the plain file COUNTER, check that the lock's fencing token is larger than TOKEN, write
 * COUNT+1 and the token in place, fsync, print the acknowledged increment ("inc COUNT TOKEN
 * OWNER"), unlock. A token not larger than the file's is a broken mutual exclusion: it prints
 * "violation ..." on stderr and exits 3. An error of the database (a takeover in progress, a
 * lost session) ends the session and the loop starts again with a new one. Runs until killed. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tenure.h"

#define RECORD 64 /* the counter file's one fixed-size record: "COUNT TOKEN", space padded */

static void read_counter(int fd, long long *count, long long *token) {
    char buf[RECORD + 1] = {0};
    *count = 0;
    *token = 0;
    if (pread(fd, buf, RECORD, 0) < 0) {
        perror("pread");
        exit(2);
    }
    if (sscanf(buf, "%lld %lld", count, token) != 2) {
        *count = 0;
        *token = 0;
    }
}

static void write_counter(int fd, long long count, long long token) {
    char buf[RECORD + 1];
    /* One pwrite of one record: a kill lands before or after it, never inside. */
    int n = snprintf(buf, sizeof buf, "%lld %lld", count, token);
    memset(buf + n, ' ', RECORD - (size_t)n);
    if (pwrite(fd, buf, RECORD, 0) != RECORD || fsync(fd) != 0) {
        perror("write counter");
        exit(2);
    }
}

static int owner(tenure *db) {
    tenure_stats s;
    return tenure_stats_read(db, &s) == TENURE_OK && s.owner;
}

static void retry(const char *what, tenure_result rc) {
    fprintf(stderr, "retry %s: %s: %s\n", what, tenure_result_str(rc),
            tenure_last_error_message());
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s DB COUNTER LOCK TTL_MS\n", argv[0]);
        return 2;
    }
    const char *name = argv[3];
    int64_t ttl_ms = strtoll(argv[4], NULL, 10);
    int fd = open(argv[2], O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        perror(argv[2]);
        return 2;
    }
    /* SIGPIPE is left at its default on purpose: the library ignores it at the shared open
     * (SPEC P20), so this test shows a write to an owner that just died does not end it. */
    tenure_options o;
    tenure *db = NULL;
    tenure_options_init(&o);
    o.shared = true;
    tenure_result rc = tenure_open(argv[1], &o, &db);
    if (rc != TENURE_OK) {
        fprintf(stderr, "open %s: %s\n", argv[1], tenure_last_error_message());
        return 2;
    }
    printf("start %ld %d\n", (long)getpid(), owner(db));
    fflush(stdout);
    for (;;) {
        tenure_session *s = NULL;
        rc = tenure_session_new(db, ttl_ms, &s);
        if (rc != TENURE_OK) {
            retry("session", rc);
            continue;
        }
        for (;;) {
            tenure_lock *l = NULL;
            rc = tenure_mutex_lock(s, name, 10000, &l);
            if (rc != TENURE_OK) {
                retry("lock", rc);
                break;
            }
            long long token = tenure_lock_fencing_token(l), count = 0, last = 0;
            read_counter(fd, &count, &last);
            if (token <= last) {
                fprintf(stderr, "violation: token %lld not above the file's %lld (count %lld)\n",
                        token, last, count);
                _exit(3);
            }
            write_counter(fd, count + 1, token);
            printf("inc %lld %lld %d\n", count + 1, token, owner(db));
            fflush(stdout);
            rc = tenure_lock_unlock(l);
            tenure_lock_free(l);
            if (rc != TENURE_OK) {
                retry("unlock", rc);
                break;
            }
        }
        tenure_session_close(s);
        tenure_session_free(s);
    }
}
