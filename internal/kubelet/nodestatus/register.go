package nodestatus

import (
	"context"
	"fmt"
	"runtime"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// defaultLabels are the labels the kubelet keeps on its Node.
func (a *Agent) defaultLabels() map[string]string {
	return map[string]string{
		v1.LabelHostname:          a.cfg.NodeName,
		v1.LabelOSStable:          runtime.GOOS,
		v1.LabelArchStable:        runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
}

// initialNode is the Node the kubelet creates.
func (a *Agent) initialNode() *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Labels: map[string]string{}}}
	for k, v := range a.cfg.Labels {
		n.Labels[k] = v
	}
	for k, v := range a.defaultLabels() {
		n.Labels[k] = v
	}
	n.Spec.Taints = append([]v1.Taint(nil), a.cfg.Taints...)
	if a.cfg.PodCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = a.cfg.PodCIDR, []string{a.cfg.PodCIDR}
	}
	return n
}

// register creates the Node, or adopts an existing one of the same name (a restart): its
// default labels are reconciled and an empty podCIDR is filled in.
func (a *Agent) register(ctx context.Context) error {
	nodes := a.cfg.Client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, a.initialNode(), metav1.CreateOptions{})
	if err == nil {
		a.log.Info("registered node")
		a.setCurrent(created)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node: %w", err)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := nodes.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get existing node: %w", err)
		}
		n := existing.DeepCopy()
		changed := false
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range a.defaultLabels() {
			if n.Labels[k] != v {
				n.Labels[k], changed = v, true
			}
		}
		if a.cfg.PodCIDR != "" && n.Spec.PodCIDR == "" {
			n.Spec.PodCIDR, n.Spec.PodCIDRs, changed = a.cfg.PodCIDR, []string{a.cfg.PodCIDR}, true
		}
		if changed {
			if n, err = nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		a.log.Info("adopted the existing node", "uid", n.UID)
		a.setCurrent(n)
		return nil
	})
}
