/* Bounded holds of a mutex (SPEC S9). Worker a takes "jobs/nightly" with a max_hold of 300 ms
 * and never unlocks (it hangs, say, while its session is still kept alive); its hold ends by
 * itself. Worker b waits with a lock_delay of 1 s: an end a did not choose (max_hold, or a's
 * session lost without an unlock) makes b sit out that second, so that a hung a has time to
 * notice, before b takes over with a higher fencing token. A plain unlock would not delay b.
 * The program ends by itself.
 *
 * Build against an installed libtenure:
 *   cc -std=c11 bounded_mutex.c $(pkg-config --cflags --libs tenure) -o bounded_mutex
 */
#include <stdio.h>
#include <stdlib.h>

#include <tenure.h>

#define TRY(call)                                                                         \
    do {                                                                                  \
        tenure_result rc_ = (call);                                                       \
        if (rc_ != TENURE_OK) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, tenure_result_str(rc_), \
                    tenure_last_error_message());                                         \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

int main(void) {
    tenure *db = NULL;
    TRY(tenure_open(NULL, NULL, &db));
    tenure_session *a = NULL, *b = NULL;
    TRY(tenure_session_new(db, 10000, &a));
    TRY(tenure_session_new(db, 10000, &b));

    struct tenure_mutex_options bounded;
    TRY(tenure_mutex_options_init(&bounded));
    bounded.max_hold_ms = 300;
    tenure_lock *la = NULL;
    TRY(tenure_mutex_lock_with(a, "jobs/nightly", -1, &bounded, &la));
    printf("a holds jobs/nightly (token %lld) for at most 300 ms\n",
           (long long)tenure_lock_fencing_token(la));

    struct tenure_mutex_options patient;
    TRY(tenure_mutex_options_init(&patient));
    patient.lock_delay_ms = 1000;
    tenure_lock *lb = NULL;
    TRY(tenure_mutex_lock_with(b, "jobs/nightly", 10000, &patient, &lb));
    int ok = !tenure_lock_is_held(la) &&
             tenure_lock_fencing_token(lb) > tenure_lock_fencing_token(la);
    printf("a's hold ended by itself; b took over (token %lld): %s\n",
           (long long)tenure_lock_fencing_token(lb), ok ? "ok" : "WRONG");

    tenure_lock_free(la);
    TRY(tenure_lock_unlock(lb));
    tenure_lock_free(lb);
    TRY(tenure_session_close(a));
    TRY(tenure_session_close(b));
    tenure_session_free(a);
    tenure_session_free(b);
    tenure_close(db);
    return ok ? 0 : 1;
}
