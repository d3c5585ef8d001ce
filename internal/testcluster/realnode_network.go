package testcluster

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// BlockServiceCIDR makes ServiceCIDR unreachable from this machine (and so
// from pods, which route through it), so that nothing sent to a ClusterIP
// leaves it. Idempotent.
func BlockServiceCIDR() error {
	out, err := exec.Command("ip", "route", "replace", "unreachable", ServiceCIDR).CombinedOutput()
	if err != nil {
		return fmt.Errorf("make the Service range %s unreachable (ip route replace unreachable %s): %w: %s", ServiceCIDR, ServiceCIDR, err, out)
	}
	return nil
}

// machineAddress is this machine's first global IPv4 address: the kubelet
// refuses a loopback node IP.
func machineAddress() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 || strings.HasPrefix(iface.Name, "nm") {
			continue
		}
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", fmt.Errorf("this machine has no global IPv4 address for the kubelet's node IP")
}

// podSubnetClaims holds one file per 10.244.N.0/24 in use by a real node of
// this machine, naming the node's directory: a node's bridge appears only
// with its first pod, so routes alone do not tell which subnets are taken.
var podSubnetClaims = filepath.Join(os.TempDir(), "nm-realnode-subnets")

// claimPodSubnet picks a 10.244.N.0/24 that no route of this machine covers
// and no live real node claims, and claims it for dir.
func claimPodSubnet(dir string) (string, error) {
	if err := os.MkdirAll(podSubnetClaims, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(podSubnetClaims, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip route: %w: %s", err, out)
	}
	for i := 0; i < 256; i++ {
		claim := filepath.Join(podSubnetClaims, strconv.Itoa(i))
		if owner, err := os.ReadFile(claim); err == nil {
			if _, err := os.Stat(strings.TrimSpace(string(owner))); err == nil {
				continue // a live node's
			}
		}
		if bytes.Contains(out, []byte(fmt.Sprintf("%s%d.", realNodeSubnetPrefix, i))) {
			continue
		}
		if err := os.WriteFile(claim, []byte(dir+"\n"), 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "subnet"), []byte(strconv.Itoa(i)+"\n"), 0o644); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s%d.0/24", realNodeSubnetPrefix, i), nil
	}
	return "", fmt.Errorf("no free /24 under %s0.0/16 for pods", realNodeSubnetPrefix)
}

func releasePodSubnet(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "subnet"))
	if err != nil {
		return
	}
	claim := filepath.Join(podSubnetClaims, strings.TrimSpace(string(b)))
	if owner, err := os.ReadFile(claim); err == nil && strings.TrimSpace(string(owner)) == dir {
		_ = os.Remove(claim)
	}
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
