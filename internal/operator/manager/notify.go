package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

// newSender is the sender of every notification (spec.notify of rollouts,
// --notify-url for every NodeMaintenance). It checks the --notify-* options
// first: each URL with the rule of spec.notify[].url, at most one token.
func newSender(o Options) (*notify.Sender, error) {
	var problems []string
	for _, u := range o.NotifyURLs {
		if p := rolloutvalidation.NotifyURLProblem("--notify-url", u); p != "" {
			problems = append(problems, p)
		}
	}
	if o.NotifyTokenFile != "" && o.NotifyTokenSecret != "" {
		problems = append(problems, "--notify-token-file and --notify-token-secret are both set: give the bearer token one way")
	}
	if o.NotifyTokenSecret != "" {
		if _, _, err := secretKey(o.NotifyTokenSecret); err != nil {
			problems = append(problems, err.Error())
		} else if o.Namespace == "" {
			problems = append(problems, "--notify-token-secret names a Secret in the operator's namespace: set --namespace (or POD_NAMESPACE)")
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	sender, err := notify.New(o.Notify)
	if err != nil {
		return nil, fmt.Errorf("set up the notifications: %w", err)
	}
	return sender, nil
}

// notifyDestinations are the destinations of --notify-url, with the token
// of --notify-token-file or --notify-token-secret (read through secrets).
func notifyDestinations(o Options, secrets client.Reader) []notify.Destination {
	var token func(context.Context) (string, error)
	switch {
	case o.NotifyTokenFile != "":
		token = tokenFile(o.NotifyTokenFile)
	case o.NotifyTokenSecret != "":
		name, key, _ := secretKey(o.NotifyTokenSecret) // checked by newSender
		token = notify.SecretToken(secrets, o.Namespace, name, key)
	}
	dests := make([]notify.Destination, 0, len(o.NotifyURLs))
	for _, u := range o.NotifyURLs {
		dests = append(dests, notify.Destination{URL: u, Token: token})
	}
	return dests
}

// secretKey splits --notify-token-secret's name/key.
func secretKey(v string) (name, key string, err error) {
	name, key, ok := strings.Cut(v, "/")
	if !ok || name == "" || key == "" || strings.Contains(key, "/") {
		return "", "", fmt.Errorf("--notify-token-secret %q is not <secret name>/<key>: e.g. notify-token/token", v)
	}
	return name, key, nil
}

// tokenFile reads the bearer token from path at each delivery, so that a
// mounted Secret's rotation takes effect without a restart.
func tokenFile(path string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read the --notify-token-file: %w", err)
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return "", fmt.Errorf("the --notify-token-file %s is empty: write the bearer token into it", path)
		}
		return token, nil
	}
}
