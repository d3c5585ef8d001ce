// Command realnode starts and stops the real (kubelet-run) nodes of
// `make cluster-up REAL_NODES=N` (hack/cluster.sh), with the same code as the
// tests' testcluster.Options.RealNodes:
//
//	realnode kwokctl-args --dir DIR              the extra `kwokctl create cluster` arguments
//	realnode up --name NODE --dir DIR --kubeconfig FILE
//	realnode down --dir DIR
//	realnode kube-proxy-up --name NODE --dir DIR --kubeconfig FILE
//	realnode kube-proxy-down --dir DIR
//
// kwokctl-args writes, into DIR, the kwokctl configuration that kube-proxy
// needs (the `kubernetes` Service's ClusterIP in the API server's
// certificate). up returns once containerd and the kubelet run (they stay
// running in the background); the node becomes Ready a moment later. down
// stops them and removes everything the node left (containers, mounts,
// cgroups, bridge, DIR). kube-proxy-up runs one kube-proxy for the real nodes
// (they share this machine's network), as the proxy of node NODE, and
// returns once it serves the `kubernetes` Service's ClusterIP; kube-proxy-down
// stops it and removes its rules.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
		if *dir == "" {
			usage()
		}
		cfg := filepath.Join(*dir, "kwokctl-kube-proxy.yaml")
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			fail(err)
		}
		if err := os.WriteFile(cfg, []byte(testcluster.KubeProxyKwokctlConfig()), 0o644); err != nil {
			fail(err)
		}
		for _, a := range append(testcluster.RealNodeKwokctlArgs(), "--config", cfg) {
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
			fail(err)
		}
		fmt.Printf("real node %s: node IP %s, pod subnet %s, logs in %s/logs\n", n.Name, n.InternalIP, n.PodSubnet, n.Dir)
	case "down":
		if *dir == "" {
			usage()
		}
		if err := testcluster.StopRealNode(*dir); err != nil {
			fail(err)
		}
	case "kube-proxy-up":
		if *dir == "" || *kubeconfig == "" {
			usage()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := testcluster.StartKubeProxy(ctx, *dir, *kubeconfig, *name); err != nil {
			fail(err)
		}
		fmt.Printf("kube-proxy: ClusterIPs served to the real nodes' pods, logs in %s\n", filepath.Join(*dir, "kube-proxy", "logs"))
	case "kube-proxy-down":
		if *dir == "" {
			usage()
		}
		testcluster.StopKubeProxy(*dir)
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: realnode kwokctl-args --dir DIR | up --name NODE --dir DIR --kubeconfig FILE | down --dir DIR | kube-proxy-up --name NODE --dir DIR --kubeconfig FILE | kube-proxy-down --dir DIR")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
	os.Exit(1)
}
