package controlplane

import (
	"context"
	"fmt"
	"log/slog"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/client-go/dynamic"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/controller/crdnaming"
	"github.com/kubette/kubette/internal/controller/crdserving"
)

// runCRDControllers starts, until ctx ends, the controllers upstream's API server runs
// for CustomResourceDefinitions, over the server's loopback client: the naming
// controller (package crdnaming), and the controllers that serve the resources of
// established definitions and delete the objects of deleted ones (crdserving).
func runCRDControllers(ctx context.Context, srv *apiserver.Server, log *slog.Logger) error {
	client, err := apiextensionsclient.NewForConfig(srv.LoopbackConfig())
	if err != nil {
		return fmt.Errorf("apiextensions loopback client: %w", err)
	}
	f := apiextensionsinformers.NewSharedInformerFactory(client, 0)
	naming, err := crdnaming.New(client, f, log)
	if err != nil {
		return err
	}
	serving, err := crdserving.New(client, f, srv, log)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(srv.LoopbackConfig())
	if err != nil {
		return fmt.Errorf("dynamic loopback client: %w", err)
	}
	finalizer, err := crdserving.NewFinalizer(client, dyn, f, log)
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	go naming.Run(ctx, 1)
	go serving.Run(ctx, 2)
	go finalizer.Run(ctx, 1)
	return nil
}
