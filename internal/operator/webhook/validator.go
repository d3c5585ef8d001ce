// Package webhook validates NodeMaintenance objects on admission.
package webhook

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
)

// ErrNodeNameImmutable is the exact message of the medik8s operator for an
// update that changes spec.nodeName.
const ErrNodeNameImmutable = "updating spec.NodeName isn't allowed"

// Path is where the validating webhook is served.
const Path = "/validate-nodemaintenance-medik8s-io-v1beta1-nodemaintenance"

// +kubebuilder:webhook:path=/validate-nodemaintenance-medik8s-io-v1beta1-nodemaintenance,mutating=false,failurePolicy=fail,sideEffects=None,groups=nodemaintenance.medik8s.io,resources=nodemaintenances,verbs=create;update,versions=v1beta1,name=vnodemaintenance.medik8s.io,admissionReviewVersions=v1,timeoutSeconds=15

// Validator admits NodeMaintenance creates and updates.
type Validator struct {
	// Reader reads live from the API server: admission must not decide on a
	// stale cache.
	Reader client.Reader
	// Cache is the manager's informer cache, of nodes (indexed by
	// nodeguard.SchedulableIndex) and NodeMaintenances; without it every
	// read is live, through Reader. The webhook reads from it the node of a
	// create (live when the cache does not have it: validator.node), the
	// nodes the guards check, and the NodeMaintenances of the first
	// decision (admit). A live read waits for the API server's answer on
	// every create, and a list of every NodeMaintenance or node grows with
	// the cluster. The guards are checked again by the controller, on the
	// same cache, before the node is touched; what a cache moments behind
	// lets through here fails there, untouched.
	Cache client.Reader
	// Writer writes the admission ledger (package ledger) that makes the
	// decision hold across replicas.
	Writer client.Writer
	// Ledger, when set, is the admission ledger, shared with the
	// controller that releases its entries: it remembers the version this
	// process last wrote (ledger.Ledger). When nil, the validator makes its
	// own of Reader and Writer.
	Ledger *ledger.Ledger
	// MaxUnavailable, when set, bounds how many nodes may be in maintenance at
	// once: a count ("2") or a percentage of all nodes ("20%", rounded down,
	// at least one); a create beyond it is refused. The operator sets it
	// only with --max-unavailable-policy=Refuse: with Queue (the default)
	// such a create is admitted and the controller queues it.
	MaxUnavailable *intstr.IntOrString
	// AllowForceDrain admits spec.drain.onTimeout Force: the installation
	// granted the operator the deletion of pods (--allow-force-drain).
	AllowForceDrain bool
	// PreviewDrain adds what a drain of the node would do now, and its risks,
	// to the warnings of an admitted create (previewWarnings).
	PreviewDrain bool
	// Pods, when set, starts the informer of the node of each admitted
	// create (nodepods.Cache.Warm) while the API server stores it: the
	// maintenance's first pass then finds the node's pods listed, or their
	// list under way, instead of starting it.
	Pods PodsWarmer
	// Now is the clock, for tests.
	Now func() time.Time

	// mu serialises the batches of creates this replica admits, so that
	// they do not race each other for the ledger; the ledger settles races
	// between replicas. pending are the creates waiting for the next batch.
	mu        sync.Mutex
	pendingMu sync.Mutex
	pending   []*pendingCreate
}

var _ admission.Validator[*nmv1beta1.NodeMaintenance] = &Validator{}

// SetupWithManager serves the validator on the manager's webhook server.
func (v *Validator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &nmv1beta1.NodeMaintenance{}).
		WithValidator(counted[*nmv1beta1.NodeMaintenance]{kind: "NodeMaintenance", next: v}).Complete()
}

// ValidateCreate admits a NodeMaintenance for an existing node that is not in
// maintenance yet, within the max-unavailable limit. Each decision is logged,
// so that with several replicas the one that admitted or refused a create
// can be found.
func (v *Validator) ValidateCreate(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	known, err := v.checkCreate(ctx, nm)
	var warnings admission.Warnings
	if err == nil {
		var preview chan admission.Warnings
		if v.PreviewDrain && !rolloutChild(nm) {
			// What the drain will do, as warnings; never a refusal. It
			// reads beside the admission decision, not after it: each
			// may wait for the API server's watch cache.
			previewCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			preview = make(chan admission.Warnings, 1)
			go func() { preview <- v.previewWarnings(previewCtx, nm, known) }()
		}
		if err = v.admitCreate(ctx, nm); err == nil && v.Pods != nil && !dryRun(ctx) {
			v.Pods.Warm(warmHolder+nm.Name, nm.Spec.NodeName, warmFor)
		}
		if err == nil && preview != nil {
			warnings = <-preview
		}
	}
	log := logf.FromContext(ctx).WithValues("nodeMaintenance", nm.Name, "node", nm.Spec.NodeName)
	if err != nil {
		log.Info("refused a NodeMaintenance create", "reason", err.Error())
	} else {
		log.Info("admitted a NodeMaintenance create")
	}
	return warnings, err
}

// PodsWarmer starts the informer of a node's pods for a while
// (nodepods.Cache).
type PodsWarmer interface {
	Warm(holder, nodeName string, ttl time.Duration)
}

// An admitted create warms its node's pods under the holder warmHolder+its
// name (a name has no "/"), for warmFor: the API server stores the object
// and the controller's first pass holds the node within moments (the
// ledger gives the store as long: ledger.TTL). Longer would keep the
// informer of a fast drain's node running after its maintenance let go.
const (
	warmHolder = "admission/"
	warmFor    = ledger.TTL
)

// dryRun reports an admission request the API server will not store.
func dryRun(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && req.DryRun != nil && *req.DryRun
}

// rolloutChild reports a NodeMaintenance a NodeMaintenanceRollout
// controls: the rollout controller creates it and reads no warnings, so it
// gets no preview (four reads of the API server, on the path of each node's
// start).
func rolloutChild(nm *nmv1beta1.NodeMaintenance) bool {
	return nmv1alpha1.ControllingRollout(nm) != ""
}

// checkCreate checks what needs no decision against the other
// NodeMaintenances: the spec, the node, its guards. It returns what it read
// live of the node and, when the guard listed them all, of the nodes: the
// preview reuses them.
func (v *Validator) checkCreate(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (live.Known, error) {
	if err := validation.ValidateNodeName(nm.Spec.NodeName); err != nil {
		return live.Known{}, err
	}
	if err := validation.ValidateDrain(nm.Spec.Drain, v.AllowForceDrain); err != nil {
		return live.Known{}, err
	}
	node, err := v.node(ctx, nm.Spec.NodeName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return live.Known{}, fmt.Errorf("node %q does not exist: a NodeMaintenance must name an existing node (see kubectl get nodes)", nm.Spec.NodeName)
		}
		return live.Known{}, fmt.Errorf("cannot check that node %q exists: %w", nm.Spec.NodeName, err)
	}
	nodes, err := v.checkNodeGuards(ctx, nm, node)
	if err != nil {
		return live.Known{}, err
	}
	return live.Known{Node: node, Nodes: nodes}, nil
}

// admitCreate decides against the other NodeMaintenances and the ledger.
// The creates this replica receives at once are decided together, in the
// order they arrived, on one read of the ledger and the NodeMaintenances and
// with one write of the ledger (a group commit): deciding them one by one
// would queue each behind the others' reads, which wait for the API
// server's watch cache (about 100 ms each when NodeMaintenances were not
// written lately), and 50 creates at once would wait seconds.
func (v *Validator) admitCreate(ctx context.Context, nm *nmv1beta1.NodeMaintenance) error {
	if dryRun(ctx) {
		// Decided as any create, and recorded nowhere: an entry in the
		// ledger would hold the node against other creates for
		// ledger.TTL, for an object that is never stored (a GitOps tool's
		// server-side dry run, kubectl --dry-run=server).
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.admitAll(ctx, []*pendingCreate{{nm: nm}}, false)[0]
	}
	req := &pendingCreate{nm: nm, done: make(chan error, 1)}
	v.pendingMu.Lock()
	v.pending = append(v.pending, req)
	v.pendingMu.Unlock()

	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case err := <-req.done: // decided in the batch of an earlier create
		return err
	default:
	}
	v.pendingMu.Lock()
	batch := v.pending
	v.pending = nil
	v.pendingMu.Unlock()
	// The batch decides for every create in it: one caller that gives up
	// must not fail the others.
	batchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	errs := v.admitAll(batchCtx, batch, true)
	for i, r := range batch {
		r.done <- errs[i]
	}
	return <-req.done
}

// batchTimeout bounds one batch's decision, within the webhook's own timeout
// (15 s).
const batchTimeout = 10 * time.Second

// pendingCreate is a create waiting for admitCreate's decision.
type pendingCreate struct {
	nm   *nmv1beta1.NodeMaintenance
	done chan error
}

// admitAll decides a batch, retrying on a ledger that changed under it;
// record says whether the admitted creates are written to the ledger.
func (v *Validator) admitAll(ctx context.Context, batch []*pendingCreate, record bool) []error {
	for attempt := 1; ; attempt++ {
		errs, err := v.admit(ctx, batch, record)
		if err == nil {
			return errs
		}
		if ledger.Retryable(err) && attempt < ledger.Attempts {
			continue
		}
		if ledger.Retryable(err) {
			err = fmt.Errorf("the admission ledger %s/%s changed %d times in a row under concurrent creates; try again", lease.Namespace, ledger.LedgerName, attempt)
		}
		for i, r := range batch {
			errs[i] = fmt.Errorf("cannot record the admission of NodeMaintenance %q for node %q: %w", r.nm.Name, r.nm.Spec.NodeName, err)
		}
		return errs
	}
}

// admit decides a batch on one read of the ledger and the stored
// NodeMaintenances, each create seeing those admitted before it, and
// records the admitted ones in the ledger (unless record is false: a dry
// run). It returns each create's
// refusal (nil: admitted), or an error for the whole batch: a retryable
// one means another admission wrote the ledger first.
//
// The NodeMaintenances are read from the operator's informer cache (the
// API server's watch cache without one): a consistent list waits for the
// API server's watch cache to catch up with etcd, about 100 ms whenever no
// NodeMaintenance was written lately, the usual case of a single create,
// and with 500 NodeMaintenances each create's list took tens of
// milliseconds of CPU to encode and decode. What a cache may not show yet
// is covered by the ledger, whose entries hold their node for ledger.TTL
// (a cache fed by a watch is moments behind); a create the cache and the
// ledger both missed (a watch broken longer than the TTL) is admitted, and
// its maintenance then fails untouched on the node's lease, which the
// other one holds. A refusal decided on a cache (which may still show a
// NodeMaintenance that is gone) is decided again on a consistent list
// before it is given.
func (v *Validator) admit(ctx context.Context, batch []*pendingCreate, record bool) ([]error, error) {
	// The ledger is read before the list: a create admitted elsewhere is in
	// the ledger until the list shows it. Read answers from the version this
	// process last wrote; if another replica wrote since, the write below
	// loses and the retry reads it live.
	admissions := v.admissions()
	snap, err := admissions.Read(ctx)
	if err != nil {
		return make([]error, len(batch)), err
	}
	errs, err := v.decide(ctx, batch, snap, fromCache)
	if err == nil && slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		// The ledger as this process last wrote it may lack another
		// replica's release: a refusal rests on the ledger read now.
		if snap, err = admissions.ReadLive(ctx); err != nil {
			return errs, err
		}
		errs, err = v.decide(ctx, batch, snap, consistent)
	}
	if err != nil || !slices.Contains(errs, nil) || !record {
		return errs, err
	}
	return errs, admissions.Write(ctx, snap)
}

// decide decides each create of batch in turn against the NodeMaintenances
// and the ledger's entries, and adds the admitted ones to snap. It reads the
// NodeMaintenances (and the nodes, for --max-unavailable) as src says.
func (v *Validator) decide(ctx context.Context, batch []*pendingCreate, snap *ledger.Snapshot, src source) ([]error, error) {
	errs := make([]error, len(batch))
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := v.list(ctx, list, src); err != nil {
		return errs, fmt.Errorf("cannot list NodeMaintenances to check the node is not in maintenance already: %w", err)
	}
	inMaintenance := v.nodesInMaintenance(list.Items, snap.Entries)
	nodeCount := 0
	if v.MaxUnavailable != nil {
		nodes := &corev1.NodeList{}
		if err := v.list(ctx, nodes, src); err != nil {
			return errs, fmt.Errorf("cannot count the nodes to apply --max-unavailable=%s: %w", v.MaxUnavailable, err)
		}
		nodeCount = len(nodes.Items)
	}
	for i, r := range batch {
		nm := r.nm
		if other, ok := inMaintenance[nm.Spec.NodeName]; ok && other != nm.Name {
			errs[i] = fmt.Errorf("node %q is already in maintenance by NodeMaintenance %q: delete that one first (or wait until it is gone) to start another", nm.Spec.NodeName, other)
			continue
		}
		if v.MaxUnavailable != nil {
			if errs[i] = v.checkMaxUnavailable(nm, inMaintenance, nodeCount); errs[i] != nil {
				continue
			}
		}
		snap.Entries[nm.Spec.NodeName] = ledger.Entry{Name: nm.Name, At: v.now()}
		inMaintenance[nm.Spec.NodeName] = nm.Name
	}
	return errs, nil
}

// admissions is the ledger: Ledger, or one of the validator's own. The
// caller holds v.mu.
func (v *Validator) admissions() *ledger.Ledger {
	if v.Ledger == nil {
		v.Ledger = &ledger.Ledger{Reader: v.Reader, Writer: v.Writer}
	}
	return v.Ledger
}

// ErrDrainImmutable is the refusal of an update that changes spec.drain.
const ErrDrainImmutable = "spec.drain cannot be changed after creation: delete the NodeMaintenance (which restores the node) and create another with the new drain policy"

// ValidateUpdate refuses a change of spec.nodeName or spec.drain.
func (v *Validator) ValidateUpdate(_ context.Context, oldNM, newNM *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	if oldNM.Spec.NodeName != newNM.Spec.NodeName {
		return nil, fmt.Errorf("%s", ErrNodeNameImmutable)
	}
	if !equality.Semantic.DeepEqual(oldNM.Spec.Drain, newNM.Spec.Drain) {
		return nil, fmt.Errorf("%s", ErrDrainImmutable)
	}
	return nil, nil
}

// ValidateDelete always admits: deleting a NodeMaintenance restores its node.
func (v *Validator) ValidateDelete(context.Context, *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) checkMaxUnavailable(nm *nmv1beta1.NodeMaintenance, inMaintenance map[string]string, nodeCount int) error {
	limit, err := validation.MaxUnavailableNodes(v.MaxUnavailable, nodeCount)
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
		nm.Spec.NodeName, len(inMaintenance)+1, nodeCount, v.MaxUnavailable.String(), limit, strings.Join(busy, ", "))
}

func (v *Validator) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}
