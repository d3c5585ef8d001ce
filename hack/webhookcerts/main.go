// Command webhookcerts writes a private CA and a webhook serving certificate
// for an operator run outside the cluster (make demo), with the operator's own
// code, so the demo needs no openssl:
//
//	webhookcerts DIR HOST...
//
// DIR receives tls.crt and tls.key (the operator's --webhook-cert-dir) and
// ca.crt (the webhook configuration's CA bundle). The certificates last a day.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: webhookcerts DIR HOST...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "webhookcerts: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string, hosts []string) error {
	caPEM, err := webhook.WriteSelfSignedCerts(dir, hosts, 24*time.Hour)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ca.crt"), caPEM, 0o600)
}
