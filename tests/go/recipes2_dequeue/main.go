// recipes2_dequeue: a consumer using etcd's contrib/recipes queues, to check that tenure's
// producers interoperate (SPEC S10). recipes2_dequeue ENDPOINT fifo|priority NAME N dequeues N
// items and prints each value on a line, in the order it got them.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"go.etcd.io/etcd/clientv3"
	recipe "go.etcd.io/etcd/contrib/recipes"
)

func fail(what string, err error) {
	fmt.Fprintln(os.Stderr, what+":", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 5 {
		fail("usage", fmt.Errorf("recipes2_dequeue ENDPOINT fifo|priority NAME N"))
	}
	n, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("N", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Args[1]}, DialTimeout: 5 * time.Second})
	if err != nil {
		fail("connect", err)
	}
	defer cli.Close()
	var dequeue func() (string, error)
	switch os.Args[2] {
	case "fifo":
		dequeue = recipe.NewQueue(cli, os.Args[3]).Dequeue
	case "priority":
		dequeue = recipe.NewPriorityQueue(cli, os.Args[3]).Dequeue
	default:
		fail("kind", fmt.Errorf("%q: expected fifo or priority", os.Args[2]))
	}
	for i := 0; i < n; i++ {
		v, err := dequeue()
		if err != nil {
			fail("dequeue", err)
		}
		fmt.Println(v)
	}
}
