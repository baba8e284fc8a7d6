// Package controllermanager is the explicit registry of kubette's controllers
// (name → constructor) and the entry point that runs them with leader election.
// It is the one package that imports every controller.
package controllermanager

import (
	"context"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/admissionpolicystatus"
	"github.com/kubette/kubette/internal/controller/clusterroleaggregation"
	"github.com/kubette/kubette/internal/controller/cronjob"
	"github.com/kubette/kubette/internal/controller/csrapproving"
	"github.com/kubette/kubette/internal/controller/csrsigning"
	"github.com/kubette/kubette/internal/controller/daemonset"
	"github.com/kubette/kubette/internal/controller/deployment"
	"github.com/kubette/kubette/internal/controller/disruption"
	"github.com/kubette/kubette/internal/controller/endpoints"
	"github.com/kubette/kubette/internal/controller/endpointslice"
	"github.com/kubette/kubette/internal/controller/endpointslicemirroring"
	"github.com/kubette/kubette/internal/controller/garbagecollector"
	"github.com/kubette/kubette/internal/controller/job"
	"github.com/kubette/kubette/internal/controller/namespace"
	"github.com/kubette/kubette/internal/controller/persistentvolume"
	"github.com/kubette/kubette/internal/controller/podautoscaler"
	"github.com/kubette/kubette/internal/controller/pvcprotection"
	"github.com/kubette/kubette/internal/controller/pvprotection"
	"github.com/kubette/kubette/internal/controller/replicaset"
	"github.com/kubette/kubette/internal/controller/replication"
	"github.com/kubette/kubette/internal/controller/resourcequota"
	"github.com/kubette/kubette/internal/controller/rootcacertpublisher"
	"github.com/kubette/kubette/internal/controller/serviceaccount"
	"github.com/kubette/kubette/internal/controller/statefulset"
	"github.com/kubette/kubette/internal/controller/ttlafterfinished"
)

// Controllers returns the registry of every controller, built in one place.
func Controllers() map[string]controller.Constructor {
	return map[string]controller.Constructor{
		replicaset.Name:  replicaset.New,
		replication.Name: replication.New,
		deployment.Name:  func(d controller.Deps) (controller.Runner, error) { return deployment.New(d) },
		garbagecollector.Name: func(d controller.Deps) (controller.Runner, error) {
			return garbagecollector.New(d)
		},
		endpoints.Name:              endpoints.New,
		endpointslice.Name:          endpointslice.New,
		endpointslicemirroring.Name: endpointslicemirroring.New,
		namespace.Name:              func(d controller.Deps) (controller.Runner, error) { return namespace.New(d) },
		serviceaccount.Name:         func(d controller.Deps) (controller.Runner, error) { return serviceaccount.New(d) },
		rootcacertpublisher.Name: func(d controller.Deps) (controller.Runner, error) {
			return rootcacertpublisher.New(d)
		},
		resourcequota.Name: func(d controller.Deps) (controller.Runner, error) { return resourcequota.New(d) },
		csrsigning.Name:    csrsigning.New,
		csrapproving.Name:  func(d controller.Deps) (controller.Runner, error) { return csrapproving.New(d) },
		clusterroleaggregation.Name: func(d controller.Deps) (controller.Runner, error) {
			return clusterroleaggregation.New(d)
		},
		job.Name:                   job.New,
		cronjob.Name:               cronjob.New,
		ttlafterfinished.Name:      ttlafterfinished.New,
		disruption.Name:            disruption.New,
		daemonset.Name:             daemonset.New,
		statefulset.Name:           statefulset.New,
		admissionpolicystatus.Name: admissionpolicystatus.New,
		persistentvolume.Name:      persistentvolume.New,
		podautoscaler.Name:         podautoscaler.New,
		pvcprotection.Name:         pvcprotection.New,
		pvprotection.Name:          pvprotection.New,
	}
}

// Run runs the controller manager with the registry's controllers, each with its
// upstream client name.
func Run(ctx context.Context, o controller.ManagerOptions) error {
	if o.Controllers == nil {
		o.Controllers = Controllers()
	}
	if o.ClientNames == nil {
		o.ClientNames = ClientNames()
	}
	return controller.RunManager(ctx, o)
}

// ClientNames maps each controller to the name upstream's kube-controller-manager gives
// its client (the end of its User-Agent, or its service account): what the API server's
// records and `kubette trace` know the controller by.
func ClientNames() map[string]string {
	return map[string]string{
		replicaset.Name:             "replicaset-controller",
		replication.Name:            "replication-controller",
		deployment.Name:             "deployment-controller",
		garbagecollector.Name:       "generic-garbage-collector",
		endpoints.Name:              "endpoint-controller",
		endpointslice.Name:          "endpointslice-controller",
		namespace.Name:              "namespace-controller",
		serviceaccount.Name:         "service-account-controller",
		rootcacertpublisher.Name:    "root-ca-cert-publisher",
		resourcequota.Name:          resourcequota.ClientName,
		csrsigning.Name:             "certificate-controller",
		csrapproving.Name:           "certificate-controller",
		clusterroleaggregation.Name: clusterroleaggregation.ClientName,
		job.Name:                    job.ClientName,
		cronjob.Name:                cronjob.ClientName,
		ttlafterfinished.Name:       ttlafterfinished.ClientName,
		disruption.Name:             disruption.ClientName,
		daemonset.Name:              daemonset.ClientName,
		statefulset.Name:            statefulset.ClientName,
		admissionpolicystatus.Name:  "validatingadmissionpolicy-status-controller",
		persistentvolume.Name:       persistentvolume.ClientName,
		podautoscaler.Name:          podautoscaler.ClientName,
		pvcprotection.Name:          pvcprotection.ClientName,
		pvprotection.Name:           pvprotection.ClientName,
	}
}
