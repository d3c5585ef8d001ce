package validation

import (
	"errors"
	"strings"
	"testing"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

func withNotify(n ...v1alpha1.Notification) *v1alpha1.NodeMaintenanceRollout {
	r := validRollout()
	r.Spec.Notify = n
	return r
}

func TestValidateRolloutAdmitsNotifications(t *testing.T) {
	r := withNotify(
		v1alpha1.Notification{URL: "https://hooks.example.com/maintenance"},
		v1alpha1.Notification{URL: "http://10.0.0.7:8080", Events: []v1alpha1.NotificationEvent{v1alpha1.EventBlocked, v1alpha1.EventHalted},
			SecretRef: &v1alpha1.SecretKeyRef{Name: "hook-token", Key: "token"}},
		v1alpha1.Notification{URL: "http://[::1]:9000/x?y=z"},
	)
	if err := ValidateRollout(r, false); err != nil {
		t.Fatalf("refused: %v", err)
	}
}

func TestValidateRolloutRefusesBadNotifications(t *testing.T) {
	for _, tt := range []struct {
		name string
		n    v1alpha1.Notification
		want string
	}{
		{"a URL without a scheme", v1alpha1.Notification{URL: "hooks.example.com/maintenance"},
			`spec.notify[1].url "hooks.example.com/maintenance" is not an absolute http or https URL with a host`},
		{"an empty URL", v1alpha1.Notification{},
			`spec.notify[1].url "" is not an absolute http or https URL with a host`},
		{"another scheme", v1alpha1.Notification{URL: "ftp://hooks.example.com"},
			`spec.notify[1].url "ftp://hooks.example.com" is not an absolute http or https URL`},
		{"no host", v1alpha1.Notification{URL: "https:///path"},
			`spec.notify[1].url "https:///path" is not an absolute http or https URL with a host`},
		{"a port alone", v1alpha1.Notification{URL: "http://:8080"},
			`spec.notify[1].url "http://:8080" is not an absolute http or https URL with a host`},
		{"not a URL", v1alpha1.Notification{URL: "http://a b"},
			`spec.notify[1].url "http://a b" is not a URL`},
		{"an unknown event", v1alpha1.Notification{URL: "https://h", Events: []v1alpha1.NotificationEvent{v1alpha1.EventStarted, "Done"}},
			`spec.notify[1].events[1] "Done" is not an event: use one of Started, Blocked, NodeDone, NodeFailed, Halted, Succeeded, Restored`},
		{"a secretRef without name", v1alpha1.Notification{URL: "https://h", SecretRef: &v1alpha1.SecretKeyRef{Key: "token"}},
			"spec.notify[1].secretRef.name is empty"},
		{"a secretRef without key", v1alpha1.Notification{URL: "https://h", SecretRef: &v1alpha1.SecretKeyRef{Name: "s"}},
			"spec.notify[1].secretRef.key is empty"},
		{"a bad secret name", v1alpha1.Notification{URL: "https://h", SecretRef: &v1alpha1.SecretKeyRef{Name: "Hook_Token", Key: "t"}},
			`spec.notify[1].secretRef.name "Hook_Token" is not a Secret name`},
		{"a bad secret key", v1alpha1.Notification{URL: "https://h", SecretRef: &v1alpha1.SecretKeyRef{Name: "s", Key: "a/b"}},
			`spec.notify[1].secretRef.key "a/b" is not a Secret key`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateRollout(withNotify(v1alpha1.Notification{URL: "https://ok.example.com"}, tt.n), false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, tt.want)
			}
			var p Problems
			if !errors.As(err, &p) || len(p) != 1 {
				t.Fatalf("want exactly one problem, got %q", err)
			}
		})
	}
}

// A notify URL may change while the rollout runs: an update is checked too.
func TestValidateRolloutUpdateChecksNotify(t *testing.T) {
	old := validRollout()
	r := withNotify(v1alpha1.Notification{URL: "hooks.example.com"})
	if err := ValidateRolloutUpdate(old, r); err == nil || !strings.Contains(err.Error(), "spec.notify[0].url") {
		t.Fatalf("update with a URL without a scheme: got %v, want spec.notify[0].url refused", err)
	}
}
