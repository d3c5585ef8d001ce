// Command realnode starts and stops the real (kubelet-run) nodes of
// `make cluster-up REAL_NODES=N` (hack/cluster.sh), with the same code as the
// tests' testcluster.Options.RealNodes:
//
//	realnode kwokctl-args                        the extra `kwokctl create cluster` arguments
//	realnode up --name NODE --dir DIR --kubeconfig FILE
//	realnode down --dir DIR
//
// up returns once containerd and the kubelet run (they stay running in the
// background); the node becomes Ready a moment later. down stops them and
// removes everything the node left (containers, mounts, cgroups, bridge, DIR).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	name := fs.String("name", "real01", "the Node's name")
	dir := fs.String("dir", "", "the directory holding everything of the node")
	kubeconfig := fs.String("kubeconfig", "", "the cluster's admin kubeconfig")
	_ = fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "kwokctl-args":
		for _, a := range testcluster.RealNodeKwokctlArgs() {
			fmt.Println(a)
		}
	case "up":
		if *dir == "" || *kubeconfig == "" {
			usage()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		n, err := testcluster.StartRealNode(ctx, testcluster.RealNodeConfig{Name: *name, Dir: *dir, Kubeconfig: *kubeconfig})
		if err != nil {
			fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("real node %s: node IP %s, pod subnet %s, logs in %s/logs\n", n.Name, n.InternalIP, n.PodSubnet, n.Dir)
	case "down":
		if *dir == "" {
			usage()
		}
		if err := testcluster.StopRealNode(*dir); err != nil {
			fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: realnode kwokctl-args | up --name NODE --dir DIR --kubeconfig FILE | down --dir DIR")
	os.Exit(2)
}
