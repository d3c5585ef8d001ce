package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// auditPolicy records, once each when the response is sent, every eviction
// and every request made by a ServiceAccount (the operator's, when it runs
// with its installed token). Everything else, nodes' heartbeats included, is
// left out to keep the log small.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/eviction"]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// AuditEvent is one entry of the API server's audit log, the fields tests
// read.
type AuditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// AuditEvents returns the audit log so far of a cluster started with
// Options.Audit.
func (c *Cluster) AuditEvents(ctx context.Context) ([]AuditEvent, error) {
	out, err := c.kwokctl(ctx, "logs", "audit", "--name", c.Name)
	if err != nil {
		return nil, err
	}
	var events []AuditEvent
	s := bufio.NewScanner(bytes.NewReader(out))
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		if len(bytes.TrimSpace(s.Bytes())) == 0 {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log of cluster %s: %w: %q", c.Name, err, s.Text())
		}
		events = append(events, e)
	}
	return events, s.Err()
}
