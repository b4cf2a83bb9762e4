// hello: the smallest etcd clientv3 program (a put and a get), proving that the Go harness
// builds and reaches a server: hello ENDPOINT prints the value read back.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/clientv3"
)

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Args[1]}, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "hello", "go"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r, err := cli.Get(ctx, "hello")
	if err != nil || len(r.Kvs) != 1 {
		fmt.Fprintln(os.Stderr, "get:", err)
		os.Exit(1)
	}
	fmt.Println(string(r.Kvs[0].Value))
}
