package manager

import (
	"reflect"
	"strings"
	"testing"
)

func TestWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Options
		want Options
	}{
		{name: "in-cluster", in: Options{}, want: Options{
			WebhookPort: DefaultWebhookPort, LeaderElectionID: DefaultLeaderElectionID, WebhookCertDir: DefaultWebhookCertDir(),
		}},
		{name: "local", in: Options{LocalWebhookURL: "https://127.0.0.1:9999", WebhookPort: 9999}, want: Options{
			LocalWebhookURL: "https://127.0.0.1:9999", WebhookPort: 9999, LeaderElectionID: DefaultLeaderElectionID,
			WebhookCertDir: DefaultLocalWebhookCertDir(9999), WebhookConfigName: DefaultLocalWebhookConfigName, WebhookHost: DefaultLocalWebhookHost,
		}},
		{name: "set fields are kept", in: Options{WebhookPort: 1, LeaderElectionID: "id", WebhookCertDir: "/certs", LocalWebhookURL: "u", WebhookConfigName: "c", WebhookHost: "h"},
			want: Options{WebhookPort: 1, LeaderElectionID: "id", WebhookCertDir: "/certs", LocalWebhookURL: "u", WebhookConfigName: "c", WebhookHost: "h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.withDefaults(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("withDefaults()\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The limit is enforced by exactly one side: the controller's queue (Queue,
// the default) or the webhook's refusal (Refuse).
func TestMaxUnavailableLimits(t *testing.T) {
	for _, tc := range []struct {
		limit, policy         string
		wantQueue, wantRefuse string
		wantErr               string
	}{
		{limit: "", policy: ""},
		{limit: "", policy: "Refuse"},
		{limit: "2", policy: "", wantQueue: "2"},
		{limit: "2", policy: "Queue", wantQueue: "2"},
		{limit: "20%", policy: "Refuse", wantRefuse: "20%"},
		{limit: "2", policy: "queue", wantErr: `invalid --max-unavailable-policy "queue"`},
		{limit: "lots", policy: "Queue", wantErr: "invalid --max-unavailable"},
	} {
		t.Run(tc.limit+"/"+tc.policy, func(t *testing.T) {
			queue, refuse, err := maxUnavailableLimits(Options{MaxUnavailable: tc.limit, MaxUnavailablePolicy: tc.policy})
			str := func(v interface{ String() string }) string {
				if reflect.ValueOf(v).IsNil() {
					return ""
				}
				return v.String()
			}
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case str(queue) != tc.wantQueue || str(refuse) != tc.wantRefuse:
				t.Errorf("queue %q, refuse %q; want %q, %q", str(queue), str(refuse), tc.wantQueue, tc.wantRefuse)
			}
		})
	}
}
