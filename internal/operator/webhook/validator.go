// Package webhook validates NodeMaintenance objects on admission.
package webhook

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// ErrNodeNameImmutable is the exact message of the medik8s operator for an
// update that changes spec.nodeName.
const ErrNodeNameImmutable = "updating spec.NodeName isn't allowed"

// Path is where the validating webhook is served.
const Path = "/validate-nodemaintenance-medik8s-io-v1beta1-nodemaintenance"

// reservationTTL is how long an admitted create holds its node while the API
// server persists it and our informer catches up.
const reservationTTL = 10 * time.Second

// +kubebuilder:webhook:path=/validate-nodemaintenance-medik8s-io-v1beta1-nodemaintenance,mutating=false,failurePolicy=fail,sideEffects=None,groups=nodemaintenance.medik8s.io,resources=nodemaintenances,verbs=create;update,versions=v1beta1,name=vnodemaintenance.medik8s.io,admissionReviewVersions=v1,timeoutSeconds=15

// Validator admits NodeMaintenance creates and updates.
type Validator struct {
	// Reader reads live from the API server: admission must not decide on a
	// stale cache.
	Reader client.Reader
	// MaxUnavailable, when set, bounds how many nodes may be in maintenance at
	// once: a count ("2") or a percentage of all nodes ("20%", rounded down,
	// at least one).
	MaxUnavailable *intstr.IntOrString
	// Now is the clock, for tests.
	Now func() time.Time

	// mu serialises creates so that two racing creates for one node cannot
	// both pass; reserved remembers admitted creates the API server may not
	// show yet.
	mu       sync.Mutex
	reserved map[string]reservation
}

type reservation struct {
	name string
	at   time.Time
}

var _ admission.Validator[*nmv1beta1.NodeMaintenance] = &Validator{}

// SetupWithManager serves the validator on the manager's webhook server.
func (v *Validator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &nmv1beta1.NodeMaintenance{}).WithValidator(v).Complete()
}

// ValidateCreate admits a NodeMaintenance for an existing node that is not in
// maintenance yet, within the max-unavailable limit.
func (v *Validator) ValidateCreate(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	if err := validation.ValidateNodeName(nm.Spec.NodeName); err != nil {
		return nil, err
	}
	node := &corev1.Node{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Name: nm.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("node %q does not exist: a NodeMaintenance must name an existing node (see kubectl get nodes)", nm.Spec.NodeName)
		}
		return nil, fmt.Errorf("cannot check that node %q exists: %w", nm.Spec.NodeName, err)
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := v.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("cannot list NodeMaintenances to check node %q is not in maintenance already: %w", nm.Spec.NodeName, err)
	}
	inMaintenance := v.nodesInMaintenance(list.Items)
	if other, ok := inMaintenance[nm.Spec.NodeName]; ok && other != nm.Name {
		return nil, fmt.Errorf("node %q is already in maintenance by NodeMaintenance %q: delete that one first (or wait until it is gone) to start another", nm.Spec.NodeName, other)
	}
	if v.MaxUnavailable != nil {
		if err := v.checkMaxUnavailable(ctx, nm, inMaintenance); err != nil {
			return nil, err
		}
	}
	if v.reserved == nil {
		v.reserved = map[string]reservation{}
	}
	v.reserved[nm.Spec.NodeName] = reservation{name: nm.Name, at: v.now()}
	return nil, nil
}

// ValidateUpdate refuses a change of spec.nodeName.
func (v *Validator) ValidateUpdate(_ context.Context, oldNM, newNM *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	if oldNM.Spec.NodeName != newNM.Spec.NodeName {
		return nil, fmt.Errorf("%s", ErrNodeNameImmutable)
	}
	return nil, nil
}

// ValidateDelete always admits: deleting a NodeMaintenance restores its node.
func (v *Validator) ValidateDelete(context.Context, *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	return nil, nil
}

// nodesInMaintenance maps node name to the NodeMaintenance holding it, from
// the live list and from creates admitted moments ago. Call with v.mu held.
func (v *Validator) nodesInMaintenance(items []nmv1beta1.NodeMaintenance) map[string]string {
	out := map[string]string{}
	stored := map[string]bool{}
	for i := range items {
		out[items[i].Spec.NodeName] = items[i].Name
		stored[items[i].Name] = true
	}
	now := v.now()
	for node, r := range v.reserved {
		switch {
		case stored[r.name] || now.Sub(r.at) > reservationTTL:
			// The API server shows it (or the create never landed): the
			// reservation has done its job.
			delete(v.reserved, node)
		default:
			if _, ok := out[node]; !ok {
				out[node] = r.name
			}
		}
	}
	return out
}

func (v *Validator) checkMaxUnavailable(ctx context.Context, nm *nmv1beta1.NodeMaintenance, inMaintenance map[string]string) error {
	nodes := &corev1.NodeList{}
	if err := v.Reader.List(ctx, nodes); err != nil {
		return fmt.Errorf("cannot count the nodes to apply --max-unavailable=%s: %w", v.MaxUnavailable, err)
	}
	limit, err := validation.MaxUnavailableNodes(v.MaxUnavailable, len(nodes.Items))
	if err != nil {
		return err
	}
	if _, ok := inMaintenance[nm.Spec.NodeName]; ok {
		return nil
	}
	if len(inMaintenance)+1 <= limit {
		return nil
	}
	busy := make([]string, 0, len(inMaintenance))
	for node, name := range inMaintenance {
		busy = append(busy, fmt.Sprintf("%s (%s)", node, name))
	}
	sort.Strings(busy)
	return fmt.Errorf("putting node %q into maintenance would make %d of %d nodes unavailable, more than --max-unavailable=%s (%d) allows; nodes already in maintenance: %s. Wait until one of them is done (delete its NodeMaintenance) and try again",
		nm.Spec.NodeName, len(inMaintenance)+1, len(nodes.Items), v.MaxUnavailable.String(), limit, strings.Join(busy, ", "))
}

func (v *Validator) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}
