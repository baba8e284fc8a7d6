package apiserver

import (
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/storage/etcd"
)

// TestContinueAfterCompaction follows the chunking conformance test (over PodTemplates): a paged list whose
// first token's revision is compacted away answers 410 Expired with a continue token; that
// token continues from the same key at the latest revision (a new resourceVersion, the
// remaining count right), and the pages after it keep that resourceVersion.
func TestContinueAfterCompaction(t *testing.T) {
	ctx := t.Context()
	s := startServer(ctx, t, Config{}, etcd.EmbeddedConfig{UnsafeNoFsync: true})
	templates := s.client.CoreV1().PodTemplates("default")
	template := func(name string) *corev1.PodTemplate {
		return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "test", Image: "test2"}}}}}
	}
	const total, limit = 30, 4
	for i := range total {
		if _, err := templates.Create(ctx, template(fmt.Sprintf("template-%04d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := templates.List(ctx, metav1.ListOptions{Limit: limit})
	if err != nil || len(first.Items) != limit || first.Continue == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	// A write after the first page, then compaction past the page's revision.
	if _, err := templates.Create(ctx, template("zz-late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cli, err := s.etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	cur, err := s.store.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, cur, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}

	_, err = templates.List(ctx, metav1.ListOptions{Limit: limit, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("continue at a compacted revision: %v, want 410 Expired", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Continue == "" || st.Code != 410 {
		t.Fatalf("410 Status %+v: want a continue token", st)
	}

	found := limit
	opts := metav1.ListOptions{Limit: limit, Continue: st.Continue}
	var rv string
	for {
		page, err := templates.List(ctx, opts)
		if err != nil {
			t.Fatalf("page after item %d: %v", found, err)
		}
		if rv == "" {
			rv = page.ResourceVersion
			if rv == first.ResourceVersion {
				t.Errorf("the inconsistent continuation kept the compacted resourceVersion %s", rv)
			}
		} else if page.ResourceVersion != rv {
			t.Errorf("page resourceVersion %s, want %s as the continuation's first", page.ResourceVersion, rv)
		}
		for _, it := range page.Items {
			want := fmt.Sprintf("template-%04d", found)
			if found == total {
				want = "zz-late" // created after the first page: the list is inconsistent, as the message says
			}
			if it.Name != want {
				t.Fatalf("item %d is %s, want %s", found, it.Name, want)
			}
			found++
		}
		if page.Continue == "" {
			if page.RemainingItemCount != nil {
				t.Errorf("last page has remainingItemCount %d", *page.RemainingItemCount)
			}
			break
		}
		if page.RemainingItemCount == nil || int(*page.RemainingItemCount)+found != total+1 {
			t.Errorf("after %d items remainingItemCount %v, want %d", found, page.RemainingItemCount, total+1-found)
		}
		opts.Continue = page.Continue
	}
	if found != total+1 {
		t.Errorf("listed %d items, want %d", found, total+1)
	}

	// A token that is not one is a bad request.
	if _, err := templates.List(ctx, metav1.ListOptions{Limit: limit, Continue: "bm90IGEgdG9rZW4"}); !apierrors.IsBadRequest(err) {
		t.Errorf("a bad token: %v, want BadRequest", err)
	}
}
