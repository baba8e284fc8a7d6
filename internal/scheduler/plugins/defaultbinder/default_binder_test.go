package defaultbinder

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// fakeHandle gives the plugin a fake clientset; the embedded Handle (nil)
// stands for the methods the plugin never calls.
type fakeHandle struct {
	framework.Handle
	client kubernetes.Interface
}

func (h fakeHandle) SnapshotSharedLister() framework.SharedLister { return nil }
func (h fakeHandle) ClientSet() kubernetes.Interface              { return h.client }
func (h fakeHandle) SharedInformerFactory() informers.SharedInformerFactory {
	return nil
}

func TestBind(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "foo", UID: "uid-1"}}
	tests := []struct {
		name      string
		injectErr error
		wantCode  framework.Code
	}{
		{name: "binds the pod with its UID"},
		{name: "API error becomes an Error status", injectErr: errors.New("conflict"), wantCode: framework.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(pod)
			client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "binding" {
					return false, nil, nil
				}
				return true, nil, tc.injectErr
			})
			p, err := New(context.Background(), nil, fakeHandle{client: client})
			if err != nil {
				t.Fatal(err)
			}
			st := p.(framework.BindPlugin).Bind(context.Background(), framework.NewCycleState(), pod, "node-1")
			if st.Code() != tc.wantCode {
				t.Fatalf("code = %v (%s), want %v", st.Code(), st.Message(), tc.wantCode)
			}
			if tc.injectErr != nil && !strings.Contains(st.Message(), "conflict") {
				t.Fatalf("message %q does not carry the API error", st.Message())
			}

			actions := client.Actions()
			if len(actions) != 1 {
				t.Fatalf("got %d actions, want 1: %v", len(actions), actions)
			}
			create, ok := actions[0].(clienttesting.CreateAction)
			if !ok || create.GetVerb() != "create" || create.GetResource().Resource != "pods" ||
				create.GetSubresource() != "binding" || create.GetNamespace() != "ns" {
				t.Fatalf("unexpected action %#v", actions[0])
			}
			want := &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "foo", UID: "uid-1"},
				Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
			}
			if got := create.GetObject(); !apiequality.Semantic.DeepEqual(got, want) {
				t.Fatalf("binding = %#v, want %#v", got, want)
			}
		})
	}
}

func TestNewNeedsHandle(t *testing.T) {
	if _, err := New(context.Background(), nil, nil); err == nil {
		t.Fatal("New without a handle succeeded")
	}
}
