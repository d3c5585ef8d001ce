package webhook

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
)

// RolloutPath is where the NodeMaintenanceRollout validator is served (the
// path controller-runtime derives from the kind).
const RolloutPath = "/validate-nodemaintenance-io-v1alpha1-nodemaintenancerollout"

// +kubebuilder:webhook:path=/validate-nodemaintenance-io-v1alpha1-nodemaintenancerollout,mutating=false,failurePolicy=fail,sideEffects=None,groups=nodemaintenance.io,resources=nodemaintenancerollouts,verbs=create;update,versions=v1alpha1,name=vnodemaintenancerollout.nodemaintenance.io,admissionReviewVersions=v1,timeoutSeconds=15

// The validator asks the API server whether a rollout's creator may create
// its step's Jobs, and reads the nodes it names.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list

// RolloutValidator admits NodeMaintenanceRollout creates and updates: the
// spec's rules (package api/v1alpha1/validation), a node set that is not
// empty, and a step its creator could run themselves.
type RolloutValidator struct {
	// Reader reads the nodes live from the API server.
	Reader client.Reader
	// Cache, when set, is the manager's node cache: the nodes of
	// spec.nodeNames are read there first, live only when it does not
	// have them.
	Cache client.Reader
	// Writer creates the SubjectAccessReviews of the step's permission.
	Writer client.Writer
	// AllowForceDrain admits spec.drain.onTimeout Force
	// (--allow-force-drain).
	AllowForceDrain bool
}

var _ admission.Validator[*nmv1alpha1.NodeMaintenanceRollout] = &RolloutValidator{}

// SetupWithManager serves the validator on the manager's webhook server, at
// RolloutPath.
func (v *RolloutValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &nmv1alpha1.NodeMaintenanceRollout{}).
		WithValidator(counted[*nmv1alpha1.NodeMaintenanceRollout]{kind: "NodeMaintenanceRollout", next: v}).Complete()
}

// ValidateCreate admits a valid rollout whose nodes exist (a selector that
// matches at least one), and whose step, if any, its creator may create
// Jobs for.
func (v *RolloutValidator) ValidateCreate(ctx context.Context, r *nmv1alpha1.NodeMaintenanceRollout) (admission.Warnings, error) {
	err := v.checkCreate(ctx, r)
	logRolloutDecision(ctx, "create", r, err)
	if err != nil {
		return nil, err
	}
	return rolloutWarnings(r), nil
}

// checkCreate checks the spec, then, for a valid spec only, what the cluster
// says: the nodes and the requester's permission, both at once.
func (v *RolloutValidator) checkCreate(ctx context.Context, r *nmv1alpha1.NodeMaintenanceRollout) error {
	if err := rolloutvalidation.ValidateRollout(r, v.AllowForceDrain); err != nil {
		return rolloutRefusal(r, err)
	}
	return rolloutRefusal(r, joinProblems(v.checkNodeSet(ctx, &r.Spec), v.checkStepPermission(ctx, r.Spec.Step)))
}

// rolloutWarnings says what an admitted rollout does that its author may not
// mean: an empty selector is valid, and takes every node of the cluster.
func rolloutWarnings(r *nmv1alpha1.NodeMaintenanceRollout) admission.Warnings {
	ls := r.Spec.NodeSelector
	if ls != nil && len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		return admission.Warnings{"spec.nodeSelector is empty: it selects every node of the cluster, which this rollout will maintain (a few at a time, as spec.maxUnavailable says)"}
	}
	return nil
}

// ValidateUpdate refuses a change of the node set, the drain or the step,
// and a mutable field set to what a create would refuse. An update that
// changes the step is refused anyway; it is also checked against the
// user's permission, so that the refusal says everything at once.
func (v *RolloutValidator) ValidateUpdate(ctx context.Context, oldR, newR *nmv1alpha1.NodeMaintenanceRollout) (admission.Warnings, error) {
	err := rolloutvalidation.ValidateRolloutUpdate(oldR, newR)
	if !rolloutvalidation.StepUnchanged(oldR, newR) && newR.Spec.Step != nil &&
		len(validation.IsDNS1123Label(newR.Spec.Step.Namespace)) == 0 {
		err = joinProblems(err, v.checkStepPermission(ctx, newR.Spec.Step))
	}
	err = rolloutRefusal(newR, err)
	logRolloutDecision(ctx, "update", newR, err)
	return nil, err
}

// ValidateDelete always admits: deleting a rollout restores the nodes it
// holds.
func (v *RolloutValidator) ValidateDelete(context.Context, *nmv1alpha1.NodeMaintenanceRollout) (admission.Warnings, error) {
	return nil, nil
}

// checkNodeSet refuses a rollout whose nodes are not there: a selector that
// matches no node, or names of nodes that do not exist (every one of them).
func (v *RolloutValidator) checkNodeSet(ctx context.Context, s *nmv1alpha1.NodeMaintenanceRolloutSpec) error {
	if s.NodeSelector != nil {
		return v.checkSelectorMatches(ctx, s.NodeSelector)
	}
	var errs []error
	// Each name from the node cache, live only when the cache does not have
	// it (a node that joined moments ago): a rollout may name hundreds of
	// nodes, and a GET each, one after the other, would hold the create for
	// as many round trips. A refusal rests on the live read.
	for i, name := range s.NodeNames {
		err := readNode(ctx, v.Cache, v.Reader, name, &corev1.Node{})
		switch {
		case apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("spec.nodeNames[%d]: node %q does not exist: list existing nodes only (see kubectl get nodes)", i, name))
		case err != nil:
			errs = append(errs, fmt.Errorf("cannot check that node %q of spec.nodeNames exists: %w", name, err))
		}
	}
	return joinProblems(errs...)
}

func (v *RolloutValidator) checkSelectorMatches(ctx context.Context, ls *metav1.LabelSelector) error {
	selector, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return fmt.Errorf("spec.nodeSelector is not a valid label selector: %w", err)
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	// One node is enough to know the set is not empty.
	if err := v.Reader.List(ctx, nodes, client.MatchingLabelsSelector{Selector: selector}, client.Limit(1)); err != nil {
		return fmt.Errorf("cannot check that spec.nodeSelector %q matches a node: %w", selector.String(), err)
	}
	if len(nodes.Items) == 0 {
		return fmt.Errorf("spec.nodeSelector %q matches no node: the rollout would have nothing to do; label the nodes to maintain or fix the selector (kubectl get nodes -l '%s')",
			selector.String(), selector.String())
	}
	return v.checkSelectedSize(ctx, selector)
}

// checkSelectedSize refuses a selector that matches more nodes than one
// rollout's status can keep rows for (rolloutvalidation.SetSizeProblem),
// from the node cache (live without one): the controller checks the set
// again when it resolves it, before it starts anything.
func (v *RolloutValidator) checkSelectedSize(ctx context.Context, selector labels.Selector) error {
	reader, opts := v.Reader, []client.ListOption{client.MatchingLabelsSelector{Selector: selector}}
	if v.Cache != nil {
		reader, opts = v.Cache, append(opts, client.UnsafeDisableDeepCopy)
	}
	nodes := &corev1.NodeList{}
	if err := reader.List(ctx, nodes, opts...); err != nil {
		return fmt.Errorf("cannot count the nodes spec.nodeSelector %q matches: %w", selector.String(), err)
	}
	names := make([]string, len(nodes.Items))
	for i := range nodes.Items {
		names[i] = nodes.Items[i].Name
	}
	if p := rolloutvalidation.SetSizeProblem(fmt.Sprintf("spec.nodeSelector %q", selector.String()), names); p != "" {
		return errors.New(p)
	}
	return nil
}

// checkStepPermission refuses a step its requester could not run: the
// operator creates the step's Jobs with its own permissions, so a rollout
// must not let anyone run a Job where they may not create one. It asks the
// API server (a SubjectAccessReview) whether the user of the admission
// request may create jobs.batch in the step's namespace.
func (v *RolloutValidator) checkStepPermission(ctx context.Context, step *nmv1alpha1.RolloutStep) error {
	if step == nil {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return fmt.Errorf("cannot tell who sent the rollout, to check they may create the Jobs of spec.step: %w", err)
	}
	user := req.UserInfo
	sar := jobCreateReview(user, step.Namespace)
	if err := v.Writer.Create(ctx, sar); err != nil {
		return fmt.Errorf("cannot check that user %q may create jobs.batch in namespace %q, as spec.step needs: %w", user.Username, step.Namespace, err)
	}
	if sar.Status.Allowed {
		return nil
	}
	msg := fmt.Sprintf("user %q may not create jobs.batch in namespace %q: a rollout's step runs a Job there on its creator's behalf, "+
		"so its creator needs that permission; ask for it (verb create on jobs in the batch group, namespace %s) or drop spec.step",
		user.Username, step.Namespace, step.Namespace)
	if sar.Status.EvaluationError != "" {
		msg += fmt.Sprintf(" (the authorizer said: %s)", sar.Status.EvaluationError)
	}
	return errors.New(msg)
}

// jobCreateReview asks whether user may create Jobs in namespace.
func jobCreateReview(user authenticationv1.UserInfo, namespace string) *authorizationv1.SubjectAccessReview {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Group: "batch", Resource: "jobs"},
	}}
}

// joinProblems joins the errors that are not nil with "; ", as the rules
// of package validation list their problems; nil when there is none.
func joinProblems(errs ...error) error {
	var p rolloutvalidation.Problems
	for _, err := range errs {
		if err != nil {
			p = append(p, err.Error())
		}
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// rolloutRefusal names the rollout in a refusal; nil stays nil.
func rolloutRefusal(r *nmv1alpha1.NodeMaintenanceRollout, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("NodeMaintenanceRollout %q: %w", r.Name, err)
}

// logRolloutDecision logs each decision, so that with several replicas the
// one that admitted or refused a request can be found.
func logRolloutDecision(ctx context.Context, op string, r *nmv1alpha1.NodeMaintenanceRollout, err error) {
	log := logf.FromContext(ctx).WithValues("nodeMaintenanceRollout", r.Name)
	if err != nil {
		log.Info("refused a NodeMaintenanceRollout "+op, "reason", err.Error())
		return
	}
	log.Info("admitted a NodeMaintenanceRollout " + op)
}
