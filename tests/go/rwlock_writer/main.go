// rwlock_writer: etcd contrib/recipes' RWMutex as a Go program would use it. rwlock_writer
// ENDPOINT NAME takes the write lock NAME, prints "locked", holds it until a line (or EOF)
// arrives on stdin, unlocks and prints "unlocked".
package main

import (
	"bufio"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	recipe "go.etcd.io/etcd/contrib/recipes"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Args[1]}, DialTimeout: 5 * time.Second})
	if err != nil {
		fail(err)
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		fail(err)
	}
	defer s.Close()
	m := recipe.NewRWMutex(s, os.Args[2])
	if err := m.Lock(); err != nil {
		fail(err)
	}
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	if err := m.Unlock(); err != nil {
		fail(err)
	}
	fmt.Println("unlocked")
}
