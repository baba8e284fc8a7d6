package controlplane

import (
	"context"
	"fmt"
	"log/slog"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/controller/crdnaming"
)

// runCRDControllers starts, until ctx ends, the controllers upstream's API server runs
// for CustomResourceDefinitions: the naming controller (package crdnaming), over the
// server's loopback client.
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
	f.Start(ctx.Done())
	go naming.Run(ctx, 1)
	return nil
}
