package controlplane

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/registry/validation"
)

// ensureSystemPriorityClasses creates system-node-critical and system-cluster-critical
// when they are missing, as upstream's scheduling post-start hook; a class another API
// server created first is left as it is.
func ensureSystemPriorityClasses(ctx context.Context, srv *apiserver.Server) error {
	client, err := kubernetes.NewForConfig(srv.LoopbackConfig())
	if err != nil {
		return fmt.Errorf("loopback client: %w", err)
	}
	for _, pc := range validation.SystemPriorityClasses() {
		_, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{FieldManager: "kube-apiserver"})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create priority class %s: %w", pc.Name, err)
		}
	}
	return nil
}
