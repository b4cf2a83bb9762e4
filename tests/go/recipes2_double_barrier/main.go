// recipes2_double_barrier: a participant of etcd's contrib/recipes double barrier, to check
// that tenure's participants interoperate (SPEC S11). recipes2_double_barrier ENDPOINT NAME
// COUNT enters (prints "entered"), then leaves (prints "left").
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	recipe "go.etcd.io/etcd/contrib/recipes"
)

func fail(what string, err error) {
	fmt.Fprintln(os.Stderr, what+":", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 4 {
		fail("usage", fmt.Errorf("recipes2_double_barrier ENDPOINT NAME COUNT"))
	}
	count, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fail("COUNT", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Args[1]}, DialTimeout: 5 * time.Second})
	if err != nil {
		fail("connect", err)
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	if err != nil {
		fail("session", err)
	}
	defer s.Close()
	b := recipe.NewDoubleBarrier(s, os.Args[2], count)
	if err := b.Enter(); err != nil {
		fail("enter", err)
	}
	fmt.Println("entered")
	if err := b.Leave(); err != nil {
		fail("leave", err)
	}
	fmt.Println("left")
}
