package validation

import (
	"fmt"
	"net/url"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// notificationEvents are the events spec.notify[].events may name (the
// CRD's enum, checked here too for the provider's plan).
var notificationEvents = []v1alpha1.NotificationEvent{
	v1alpha1.EventStarted, v1alpha1.EventBlocked, v1alpha1.EventNodeDone, v1alpha1.EventNodeFailed,
	v1alpha1.EventHalted, v1alpha1.EventSucceeded, v1alpha1.EventRestored,
}

// notifyProblems checks spec.notify: each URL, event and secretRef.
func notifyProblems(s *v1alpha1.NodeMaintenanceRolloutSpec) Problems {
	var p Problems
	for i, n := range s.Notify {
		field := fmt.Sprintf("spec.notify[%d]", i)
		p = append(p, NotifyURLProblem(field+".url", n.URL))
		for j, e := range n.Events {
			if !knownEvent(e) {
				p = append(p, fmt.Sprintf("%s.events[%d] %q is not an event: use one of %s, or leave events empty for all", field, j, e, eventNames()))
			}
		}
		if ref := n.SecretRef; ref != nil {
			p = append(p, secretRefProblem(field+".secretRef.name", ref.Name,
				"the Secret, in the operator's namespace, that holds the bearer token", "Secret name", apivalidation.IsDNS1123Subdomain))
			p = append(p, secretRefProblem(field+".secretRef.key", ref.Key,
				"the key of the Secret's data that holds the bearer token", "Secret key", apivalidation.IsConfigMapKey))
		}
	}
	return compact(p)
}

// NotifyURLProblem says what is wrong with a notification URL, or "" when
// it is an absolute http or https URL with a host. field names it (the
// operator's --notify-url uses it too).
func NotifyURLProblem(field, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Sprintf("%s %q is not a URL (%v): give an absolute http or https URL, e.g. https://hooks.example.com/maintenance", field, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return fmt.Sprintf("%s %q is not an absolute http or https URL with a host: give the scheme and the host, e.g. https://hooks.example.com/maintenance", field, raw)
	}
	return ""
}

// secretRefProblem says what is wrong with a secretRef's name or key v:
// empty (it must say what the field holds), or refused by valid.
func secretRefProblem(field, v, holds, what string, valid func(string) []string) string {
	if v == "" {
		return fmt.Sprintf("%s is empty: name %s", field, holds)
	}
	if errs := valid(v); len(errs) > 0 {
		return fmt.Sprintf("%s %q is not a %s: %s", field, v, what, strings.Join(errs, "; "))
	}
	return ""
}

func knownEvent(e v1alpha1.NotificationEvent) bool {
	for _, k := range notificationEvents {
		if e == k {
			return true
		}
	}
	return false
}

func eventNames() string {
	names := make([]string, 0, len(notificationEvents))
	for _, e := range notificationEvents {
		names = append(names, string(e))
	}
	return strings.Join(names, ", ")
}
