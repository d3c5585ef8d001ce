package manager

import (
	"reflect"
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
