package ingress

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

func traceConf(endpoint string) []byte {
	return []byte(`http {
    upstream default_a_80 {
        server ` + endpoint + `:80 max_fails=0;
    }
    server {
        # owner default/first
        location / {
            proxy_pass http://default_a_80;
        }
        # owner default/second
        location /b {
            return 404;
        }
    }
}
`)
}

func traceIngress(name, rv string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv}}
}

func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			slices.Sort(out)
			return out
		}
	}
}

func TestSyncAndReloadEvents(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	c := &Controller{recorder: rec}
	first, second := traceIngress("first", "1"), traceIngress("second", "1")
	c.applied = traceConf("10.244.0.4")
	c.reportSynced([]*networkingv1.Ingress{first, second})
	if got := drainEvents(rec); len(got) != 0 {
		t.Fatalf("first sync (a baseline) reported %v", got)
	}

	// Nothing changed: nothing to say.
	c.reportSynced([]*networkingv1.Ingress{first, second})
	if got := drainEvents(rec); len(got) != 0 {
		t.Fatalf("unchanged sync reported %v", got)
	}

	// second changed (no configuration change of its own), first's upstream changed.
	second = traceIngress("second", "2")
	third := traceIngress("third", "5")
	c.applied = traceConf("10.244.0.9")
	c.reportSynced([]*networkingv1.Ingress{first, second, third})
	want := []string{"Normal RELOAD NGINX reload triggered due to a change in configuration", "Normal Sync Scheduled for sync", "Normal Sync Scheduled for sync"}
	if got := drainEvents(rec); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}
