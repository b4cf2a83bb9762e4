// stm: etcd's own concurrency.STM moving money between accounts.
//
//	stm ENDPOINT ISOLATION  (serializable | repeatable | snapshot)
//
// Writes 5 accounts of 100, then 8 goroutines each make 25 transfers of a random amount from
// one random account to another inside an STM at the given isolation level (serializable and
// snapshot read every key at the revision of the first read: they need reads at a past
// revision). Prints "errors=N total=T accounts=A" and exits 1 if any STM call failed or the
// total moved.
package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

const (
	accounts  = 5
	start     = 100
	workers   = 8
	transfers = 25
)

func account(i int) string { return fmt.Sprintf("stm/account/%d", i) }

func fail(msg string, err error) {
	fmt.Fprintln(os.Stderr, msg, err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: stm ENDPOINT serializable|repeatable|snapshot", nil)
	}
	var iso concurrency.Isolation
	switch os.Args[2] {
	case "serializable":
		iso = concurrency.Serializable
	case "repeatable":
		iso = concurrency.RepeatableReads
	case "snapshot":
		iso = concurrency.SerializableSnapshot
	default:
		fail("unknown isolation", fmt.Errorf("%q", os.Args[2]))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Args[1]}, DialTimeout: 5 * time.Second})
	if err != nil {
		fail("connect:", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < accounts; i++ {
		if _, err := cli.Put(ctx, account(i), strconv.Itoa(start)); err != nil {
			fail("put:", err)
		}
	}

	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for t := 0; t < transfers; t++ {
				from := rng.Intn(accounts)
				to := (from + 1 + rng.Intn(accounts-1)) % accounts
				move := func(s concurrency.STM) error {
					a, err := strconv.Atoi(s.Get(account(from)))
					if err != nil {
						return fmt.Errorf("account %d: %v", from, err)
					}
					b, err := strconv.Atoi(s.Get(account(to)))
					if err != nil {
						return fmt.Errorf("account %d: %v", to, err)
					}
					amount := a / 2
					s.Put(account(from), strconv.Itoa(a-amount))
					s.Put(account(to), strconv.Itoa(b+amount))
					return nil
				}
				_, err := concurrency.NewSTM(cli, move, concurrency.WithAbortContext(ctx), concurrency.WithIsolation(iso))
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}(int64(w + 1))
	}
	wg.Wait()

	r, err := cli.Get(ctx, "stm/account/", clientv3.WithPrefix())
	if err != nil {
		fail("get:", err)
	}
	total := 0
	for _, kv := range r.Kvs {
		n, err := strconv.Atoi(string(kv.Value))
		if err != nil {
			fail("value:", err)
		}
		total += n
	}
	fmt.Printf("errors=%d total=%d accounts=%d\n", len(errs), total, len(r.Kvs))
	for i, e := range errs {
		if i < 5 {
			fmt.Fprintln(os.Stderr, "stm:", e)
		}
	}
	if len(errs) != 0 || total != accounts*start || len(r.Kvs) != accounts {
		os.Exit(1)
	}
}
