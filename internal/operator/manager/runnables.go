package manager

import (
	"context"
	"fmt"
	"net/http"
	goruntime "runtime"
	"runtime/debug"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubedrain "k8s.io/kubectl/pkg/drain"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodeguard"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodepods"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodewrites"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/rollout"
	nmwebhook "github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
)

// addRunnables adds what the manager runs: on the leader, the
// NodeMaintenance and NodeMaintenanceRollout controllers and the memory
// release once the node cache synced; on every replica, the validating
// webhooks once certsReady, and the health and ready checks.
// refuseBeyond is the --max-unavailable limit the webhook refuses creates
// beyond (--max-unavailable-policy=Refuse); nil when the controller queues
// them or there is no limit.
func addRunnables(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, o Options, refuseBeyond *intstr.IntOrString, certsReady <-chan struct{}, sender *notify.Sender) error {
	// One admission ledger for the webhook that writes its entries and the
	// controller that releases them: it remembers the version this process
	// last wrote, and neither reads it before each write.
	admissions := &ledger.Ledger{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()}
	// The webhook's and the controller's node guards read the cached nodes
	// through this index (nodeguard.Nodes).
	if err := nodeguard.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("index the cached nodes by whether they take pods: %w", err)
	}
	// Both controllers write nodes (the NodeMaintenances' cordons and
	// conditions, the rollouts' MaintenancePlanned), often one right after
	// the other: each reads the nodes as both last wrote them.
	recent := &nodewrites.Recent{}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The pods of the nodes being drained, and no others: slim, as the drain
	// reads them, in one informer per node that the leader runs. The
	// webhook starts a node's informer when it admits a create for it.
	pods := nodepods.New(nodepods.Informers(clientset), SlimPod)
	if err := mgr.Add(pods); err != nil {
		return err
	}
	if err := addReconciler(ctx, mgr, clientset, pods, o, sender, admissions, recent); err != nil {
		return err
	}
	if err := addRolloutReconciler(mgr, o, sender, recent); err != nil {
		return err
	}
	validating, err := addValidator(mgr, admissions, pods, refuseBeyond, o.Controller.AllowForceDrain, certsReady)
	if err != nil {
		return err
	}
	if err := mgr.Add(freeOSMemoryOnceNodesSynced(mgr)); err != nil {
		return err
	}
	return addChecks(mgr, validating)
}

// addReconciler adds the NodeMaintenance controller. sender, a Runnable of
// the leader as the controllers that send, takes its events to --notify-url.
func addReconciler(ctx context.Context, mgr ctrl.Manager, clientset kubernetes.Interface, pods *nodepods.Cache, o Options, sender *notify.Sender, admissions *ledger.Ledger, recent *nodewrites.Recent) error {
	reconciler := &controller.NodeMaintenanceReconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recent:     recent,
		Recorder:   mgr.GetEventRecorder("node-maintenance"),
		Leases:     &lease.Manager{Client: mgr.GetClient(), Reader: mgr.GetClient(), Duration: o.LeaseDuration},
		Admissions: admissions,
		Evictor:    drain.KubectlEvictor(&kubedrain.Helper{Client: clientset, GracePeriodSeconds: -1}),
		Pods:       pods,
		Options:    o.Controller,
		Notify:     sender,
		NotifyTo:   notifyDestinations(o, mgr.GetClient()),
	}
	if err := reconciler.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up the NodeMaintenance controller: %w", err)
	}
	return nil
}

// addRolloutReconciler adds the NodeMaintenanceRollout controller, on the
// leader as every controller: it creates and deletes the NodeMaintenances of
// its nodes, which the NodeMaintenance controller maintains.
func addRolloutReconciler(mgr ctrl.Manager, o Options, sender *notify.Sender, recent *nodewrites.Recent) error {
	reconciler := &rollout.RolloutReconciler{
		Client:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		Recent:             recent,
		Scheme:             mgr.GetScheme(),
		Recorder:           mgr.GetEventRecorder("node-maintenance-rollout"),
		SkipNameValidation: o.Controller.SkipNameValidation,
		Notify:             sender,
		// The cache holds the Secrets of the operator's namespace only.
		Secrets:   mgr.GetClient(),
		Namespace: o.Namespace,
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the NodeMaintenanceRollout controller: %w", err)
	}
	return nil
}

// addValidator registers the webhooks (NodeMaintenance and
// NodeMaintenanceRollout) once the certificates exist (they cannot be
// registered before), on every replica: the API server sends admission
// requests to any ready pod behind the Service, leader or not. The channel
// it returns is closed once both are registered.
func addValidator(mgr ctrl.Manager, admissions *ledger.Ledger, pods *nodepods.Cache, maxUnavailable *intstr.IntOrString, allowForceDrain bool, certsReady <-chan struct{}) (<-chan struct{}, error) {
	validator := &nmwebhook.Validator{Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(), Writer: mgr.GetClient(), Ledger: admissions, MaxUnavailable: maxUnavailable, AllowForceDrain: allowForceDrain, PreviewDrain: true, Pods: pods}
	rollouts := &nmwebhook.RolloutValidator{Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(), Writer: mgr.GetClient(), AllowForceDrain: allowForceDrain}
	registered := make(chan struct{})
	return registered, mgr.Add(everyReplica(func(ctx context.Context) error {
		select {
		case <-certsReady:
		case <-ctx.Done():
			return nil
		}
		// The webhook decides on the informer cache of the nodes and the
		// NodeMaintenances: it is ready once they are synced. On a standby
		// replica, whose controller does not run, nothing else starts the
		// NodeMaintenances' informer.
		for _, o := range []client.Object{&corev1.Node{}, &nmv1beta1.NodeMaintenance{}} {
			if _, err := mgr.GetCache().GetInformer(ctx, o); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("sync the operator's cache of %T for the webhook: %w", o, err)
			}
		}
		if err := validator.SetupWithManager(mgr); err != nil {
			return err
		}
		if err := rollouts.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up the NodeMaintenanceRollout webhook: %w", err)
		}
		close(registered)
		return nil
	}))
}

// freeOSMemoryOnceNodesSynced: once the first list of every node has been
// taken in, the full objects it was decoded into are garbage, the largest
// the operator makes at start (the pods are no longer listed cluster-wide:
// only those of the nodes being drained are, package nodepods). Return that
// memory to the OS at once rather than over minutes, and log what is held
// (make bench's P5 measures the operator's memory on a large cluster). It
// runs on the leader, whose controller watches the nodes.
func freeOSMemoryOnceNodesSynced(mgr ctrl.Manager) ctrlmanager.RunnableFunc {
	return func(ctx context.Context) error {
		if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{}); err != nil {
			return nil // stopping, or the informer failed; nothing to release
		}
		debug.FreeOSMemory()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		ctrl.Log.WithName("memory").Info("node cache synced; unused memory returned to the OS",
			"heapInUseMB", ms.HeapInuse>>20, "heapReleasedMB", ms.HeapReleased>>20, "sysMB", ms.Sys>>20)
		return nil
	}
}

// addChecks: alive once serving probes; ready once the webhook is registered
// and its server serves with its certificates, so that the Service sends
// admission requests only to pods that answer them.
func addChecks(mgr ctrl.Manager, validating <-chan struct{}) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		select {
		case <-validating:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return fmt.Errorf("the validating webhook is not registered yet (waiting for its certificates)")
		}
	})
}

// everyReplica is a runnable that every replica runs, leader or not; a
// runnable added to the manager otherwise runs on the leader only.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection tells the manager to run it without the leader lease.
func (everyReplica) NeedLeaderElection() bool { return false }
