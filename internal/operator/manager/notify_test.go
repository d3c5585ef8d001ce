package manager

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestNotifyOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"a URL without a scheme", Options{NotifyURLs: []string{"https://ok", "hooks.example.com/x"}},
			`--notify-url "hooks.example.com/x" is not an absolute http or https URL with a host`},
		{"two tokens", Options{NotifyURLs: []string{"https://ok"}, NotifyTokenFile: "/t", NotifyTokenSecret: "s/k", Namespace: "ns"},
			"--notify-token-file and --notify-token-secret are both set"},
		{"a secret without a key", Options{NotifyTokenSecret: "s", Namespace: "ns"}, `--notify-token-secret "s" is not <secret name>/<key>`},
		{"a secret without a namespace", Options{NotifyTokenSecret: "s/k"}, "--notify-token-secret names a Secret in the operator's namespace: set --namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newSender(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Every --notify-url gets the token of --notify-token-file or
// --notify-token-secret, read at delivery.
func TestNotifyDestinationsCarryTheToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(" from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "hook"},
		Data: map[string][]byte{"token": []byte("from-secret")}}).Build()
	urls := []string{"https://a", "http://b:8080"}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"file", Options{NotifyURLs: urls, NotifyTokenFile: file}, "from-file"},
		{"secret", Options{NotifyURLs: urls, NotifyTokenSecret: "hook/token", Namespace: "ops"}, "from-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newSender(tc.o); err != nil {
				t.Fatal(err)
			}
			dests := notifyDestinations(tc.o, secrets)
			if len(dests) != 2 || dests[1].URL != urls[1] {
				t.Fatalf("destinations %+v", dests)
			}
			for _, d := range dests {
				if got, err := d.Token(context.Background()); err != nil || got != tc.want {
					t.Errorf("token of %s: %q, %v; want %q", d.URL, got, err, tc.want)
				}
			}
		})
	}
	missing := notifyDestinations(Options{NotifyURLs: urls, NotifyTokenSecret: "hook/other", Namespace: "ops"}, secrets)
	if _, err := missing[0].Token(context.Background()); err == nil || !strings.Contains(err.Error(), `key "other" of Secret ops/hook`) {
		t.Errorf("a missing key: %v", err)
	}
	if d := notifyDestinations(Options{NotifyURLs: urls}, secrets); d[0].Token != nil {
		t.Error("a destination without a token option has a token")
	}
}
