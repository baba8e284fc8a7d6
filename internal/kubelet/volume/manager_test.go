package volume

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func ptr[T any](v T) *T { return &v }

func testPod(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID("uid-1"),
			Labels: map[string]string{"app": "web", "tier": "a\"b"}, Annotations: map[string]string{"note": "x"}},
		Spec:   v1.PodSpec{NodeName: "node1", Volumes: vols, Containers: []v1.Container{{Name: "c"}}},
		Status: v1.PodStatus{PodIP: "10.0.0.5"},
	}
}

func newManager(t *testing.T, objs ...runtime.Object) (*Manager, *fake.Clientset, string) {
	t.Helper()
	root := t.TempDir()
	cs := fake.NewClientset(objs...)
	return New(Config{RootDir: root, Client: cs, SecretsOnDisk: true}), cs, root
}

// visible reads a volume's user-visible files.
func visible(t *testing.T, root, plugin, name string) map[string]string {
	t.Helper()
	return readVisible(t, filepath.Join(root, "pods", "uid-1", "volumes", plugin, name))
}

func TestSetupConfigMap(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"},
		Data: map[string]string{"a": "A", "b": "B"}, BinaryData: map[string][]byte{"bin": {0, 1}}}
	tests := []struct {
		name    string
		src     v1.ConfigMapVolumeSource
		want    map[string]string
		modes   map[string]os.FileMode
		wantErr string
	}{
		{name: "all keys", src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}},
			want: map[string]string{"a": "A", "b": "B", "bin": "\x00\x01"}, modes: map[string]os.FileMode{"a": 0o644}},
		{name: "default mode", src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, DefaultMode: ptr[int32](0o400)},
			want: map[string]string{"a": "A", "b": "B", "bin": "\x00\x01"}, modes: map[string]os.FileMode{"b": 0o400}},
		{name: "items with paths and modes", src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			DefaultMode: ptr[int32](0o640),
			Items:       []v1.KeyToPath{{Key: "a", Path: "dir/a.txt", Mode: ptr[int32](0o600)}, {Key: "b", Path: "b.txt"}}},
			want: map[string]string{"dir/a.txt": "A", "b.txt": "B"}, modes: map[string]os.FileMode{"dir/a.txt": 0o600, "b.txt": 0o640}},
		{name: "missing key", src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items: []v1.KeyToPath{{Key: "nope", Path: "n"}}},
			wantErr: `volume "v": configmap references non-existent config key: nope`},
		{name: "missing key optional", src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items: []v1.KeyToPath{{Key: "nope", Path: "n"}, {Key: "a", Path: "a"}}, Optional: ptr(true)},
			want: map[string]string{"a": "A"}},
		{name: "missing configmap", src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}},
			wantErr: `volume "v": configmap "x" not found`},
		{name: "missing optional configmap", src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}, Optional: ptr(true)},
			want: map[string]string{}},
		{name: "escaping item path", src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items: []v1.KeyToPath{{Key: "a", Path: "../a"}}},
			wantErr: `must not contain '..'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, root := newManager(t, cm)
			err := m.Setup(context.Background(), testPod(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &tt.src}}), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := visible(t, root, PluginConfigMap, "v")
			if len(got) != len(tt.want) {
				t.Fatalf("files = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for p, mode := range tt.modes {
				info, err := os.Stat(filepath.Join(root, "pods/uid-1/volumes", PluginConfigMap, "v", p))
				if err != nil || info.Mode().Perm() != mode {
					t.Errorf("mode of %s = %v (%v), want %v", p, info.Mode().Perm(), err, mode)
				}
			}
		})
	}
}

func TestSetupConfigMapUpdate(t *testing.T) {
	ctx := context.Background()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"a": "1", "old": "x"}}
	m, cs, root := newManager(t, cm)
	pod := testPod(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"a": "2", "new": "y"}
	if _, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	got := visible(t, root, PluginConfigMap, "v")
	if len(got) != 2 || got["a"] != "2" || got["new"] != "y" {
		t.Fatalf("after update: %v", got)
	}
}

func TestSetupSecret(t *testing.T) {
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"user": []byte("u"), "pass": []byte("p")}}
	tests := []struct {
		name    string
		src     v1.SecretVolumeSource
		want    map[string]string
		wantErr string
	}{
		{name: "all keys", src: v1.SecretVolumeSource{SecretName: "s"}, want: map[string]string{"user": "u", "pass": "p"}},
		{name: "items", src: v1.SecretVolumeSource{SecretName: "s", Items: []v1.KeyToPath{{Key: "pass", Path: "creds/pw"}}}, want: map[string]string{"creds/pw": "p"}},
		{name: "missing key", src: v1.SecretVolumeSource{SecretName: "s", Items: []v1.KeyToPath{{Key: "k", Path: "k"}}}, wantErr: "references non-existent secret key: k"},
		{name: "missing secret", src: v1.SecretVolumeSource{SecretName: "x"}, wantErr: `secret "x" not found`},
		{name: "missing optional secret", src: v1.SecretVolumeSource{SecretName: "x", Optional: ptr(true)}, want: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, root := newManager(t, sec)
			err := m.Setup(context.Background(), testPod(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &tt.src}}), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := visible(t, root, PluginSecret, "v")
			if len(got) != len(tt.want) {
				t.Fatalf("files = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestSetupDownwardAPIAndProjected(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"a": "A"}}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("K")}}
	m, _, root := newManager(t, cm, sec)
	items := []v1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "app", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
		{Path: "ip", FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}},
		{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
	}
	pod := testPod(
		v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}},
		v1.Volume{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Items: []v1.KeyToPath{{Key: "k", Path: "sec/k"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: items[:1]}},
		}}}},
	)
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	if err := m.Setup(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	d := visible(t, root, PluginDownwardAPI, "d")
	want := map[string]string{"name": "p", "labels": "app=\"web\"\ntier=\"a\\\"b\"", "app": "web", "ip": "10.0.0.5", "mem": "64"}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("downwardAPI %s = %q, want %q", k, d[k], v)
		}
	}
	p := visible(t, root, PluginProjected, "p")
	if len(p) != 3 || p["a"] != "A" || p["sec/k"] != "K" || p["name"] != "p" {
		t.Errorf("projected = %v", p)
	}
}

func TestSetupProjectedServiceAccountToken(t *testing.T) {
	m, cs, root := newManager(t)
	pod := testPod(v1.Volume{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "api"}},
	}}}})
	var calls int
	cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "token" {
			return false, nil, nil
		}
		calls++
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		if tr.Spec.BoundObjectRef == nil || tr.Spec.BoundObjectRef.UID != "uid-1" || len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != "api" {
			t.Errorf("token request = %+v", tr.Spec)
		}
		// A JWT issued now for an hour.
		now := time.Now().Unix()
		claims := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"iat":%d,"exp":%d}`, now, now+3600))
		tr.Status.Token = "h." + claims + ".s"
		return true, tr, nil
	})
	if err := m.Setup(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	tok := visible(t, root, PluginProjected, "tok")["token"]
	if !strings.HasPrefix(tok, "h.") {
		t.Fatalf("token file = %q", tok)
	}
	// A fresh token is kept on re-Setup.
	if err := m.Setup(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || visible(t, root, PluginProjected, "tok")["token"] != tok {
		t.Fatalf("token requested %d times", calls)
	}
}

func TestTokenFresh(t *testing.T) {
	// {"iat":1000,"exp":2000}
	tok := []byte("eyJhbGciOiJSUzI1NiJ9.eyJpYXQiOjEwMDAsImV4cCI6MjAwMH0.sig")
	for now, want := range map[int64]bool{1500: true, 1799: true, 1800: false, 2500: false} {
		if got := tokenFresh(tok, unixTime(now)); got != want {
			t.Errorf("fresh at %d = %v, want %v", now, got, want)
		}
	}
	if tokenFresh([]byte("garbage"), unixTime(0)) {
		t.Error("garbage is fresh")
	}
}

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		path    string
		typ     v1.HostPathType
		wantErr string
	}{
		{missing, v1.HostPathUnset, ""},
		{dir, v1.HostPathDirectory, ""},
		{file, v1.HostPathDirectory, "hostPath type check failed: " + file + " is not a directory"},
		{missing, v1.HostPathDirectory, "hostPath type check failed: " + missing + " is not a directory"},
		{filepath.Join(dir, "new/dir"), v1.HostPathDirectoryOrCreate, ""},
		{file, v1.HostPathDirectoryOrCreate, "is not a directory"},
		{file, v1.HostPathFile, ""},
		{dir, v1.HostPathFile, "hostPath type check failed: " + dir + " is not a file"},
		{filepath.Join(dir, "newfile"), v1.HostPathFileOrCreate, ""},
		{sock, v1.HostPathSocket, ""},
		{file, v1.HostPathSocket, "is not a socket file"},
		{"/dev/null", v1.HostPathCharDev, ""},
		{file, v1.HostPathCharDev, "is not a character device"},
		{"/dev/null", v1.HostPathBlockDev, "/dev/null is not a block device"},
		{dir, "Weird", "Weird is an invalid volume type"},
	}
	for _, tt := range tests {
		t.Run(string(tt.typ)+" "+filepath.Base(tt.path), func(t *testing.T) {
			typ := tt.typ
			err := checkHostPath(&v1.HostPathVolumeSource{Path: tt.path, Type: &typ})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if info, err := os.Stat(filepath.Join(dir, "new/dir")); err != nil || !info.IsDir() {
		t.Errorf("DirectoryOrCreate made nothing: %v", err)
	}
	if info, err := os.Stat(filepath.Join(dir, "newfile")); err != nil || !info.Mode().IsRegular() {
		t.Errorf("FileOrCreate made nothing: %v", err)
	}
}

func TestMounts(t *testing.T) {
	ctx := context.Background()
	hostDir := t.TempDir()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"a": "A"}}
	m, _, root := newManager(t, cm)
	pod := testPod(
		v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}},
	)
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(root, "pods/uid-1/volumes", PluginEmptyDir, "cache")
	if info, err := os.Stat(empty); err != nil || info.Mode().Perm() != 0o777 {
		t.Fatalf("emptyDir: %v %v", info, err)
	}
	c := &v1.Container{Name: "c",
		Env: []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}, {Name: "SUB", Value: "x-$(POD)"}},
		VolumeMounts: []v1.VolumeMount{
			{Name: "cache", MountPath: "/cache"},
			{Name: "cfg", MountPath: "/etc/cfg"},
			{Name: "host", MountPath: "/host", ReadOnly: true, MountPropagation: ptr(v1.MountPropagationHostToContainer)},
			{Name: "cache", MountPath: "/sub", SubPath: "a/b"},
			{Name: "cache", MountPath: "/expr", SubPathExpr: "logs/$(SUB)/$(UNKNOWN)"},
			{Name: "cfg", MountPath: "/etc/a", SubPath: "a"},
		}}
	got, err := m.Mounts(pod, c)
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := filepath.Join(root, "pods/uid-1/volumes", PluginConfigMap, "cfg")
	realCfgA, err := filepath.EvalSymlinks(filepath.Join(cfgDir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	realEmpty, _ := filepath.EvalSymlinks(empty)
	want := []*runtimeapi.Mount{
		{ContainerPath: "/cache", HostPath: empty},
		{ContainerPath: "/etc/cfg", HostPath: cfgDir, Readonly: true},
		{ContainerPath: "/host", HostPath: hostDir, Readonly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{ContainerPath: "/sub", HostPath: filepath.Join(realEmpty, "a/b")},
		{ContainerPath: "/expr", HostPath: filepath.Join(realEmpty, "logs/x-p/$(UNKNOWN)")},
		{ContainerPath: "/etc/a", HostPath: realCfgA, Readonly: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ContainerPath != w.ContainerPath || g.HostPath != w.HostPath || g.Readonly != w.Readonly || g.Propagation != w.Propagation || g.SelinuxRelabel {
			t.Errorf("mount %d = %v, want %v", i, g, w)
		}
	}
	if info, err := os.Stat(filepath.Join(empty, "a/b")); err != nil || !info.IsDir() {
		t.Errorf("subPath dir not created: %v", err)
	}
}

func TestMountsRejects(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	m, _, root := newManager(t)
	pod := testPod(v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(root, "pods/uid-1/volumes", PluginEmptyDir, "cache")
	if err := os.Symlink(outside, filepath.Join(empty, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../..", filepath.Join(empty, "up")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		vm      v1.VolumeMount
		priv    bool
		wantErr string
	}{
		{"unknown volume", v1.VolumeMount{Name: "nope", MountPath: "/x"}, false, `cannot find volume "nope" to mount into container "c"`},
		{"dotdot", v1.VolumeMount{Name: "cache", MountPath: "/x", SubPath: "a/../../b"}, false, "must not contain '..'"},
		{"absolute", v1.VolumeMount{Name: "cache", MountPath: "/x", SubPath: "/etc"}, false, "must not be an absolute path"},
		{"symlink out", v1.VolumeMount{Name: "cache", MountPath: "/x", SubPath: "out"}, false, "outside its volume"},
		{"symlink out then down", v1.VolumeMount{Name: "cache", MountPath: "/x", SubPath: "out/new"}, false, "outside its volume"},
		{"relative symlink up", v1.VolumeMount{Name: "cache", MountPath: "/x", SubPath: "up"}, false, "outside its volume"},
		{"expr dotdot", v1.VolumeMount{Name: "cache", MountPath: "/x", SubPathExpr: "$(UP)/etc"}, false, "must not contain '..'"},
		{"bidirectional unprivileged", v1.VolumeMount{Name: "cache", MountPath: "/x", MountPropagation: ptr(v1.MountPropagationBidirectional)}, false, "Bidirectional mount propagation is available only to privileged containers"},
		{"bidirectional privileged", v1.VolumeMount{Name: "cache", MountPath: "/x", MountPropagation: ptr(v1.MountPropagationBidirectional)}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "UP", Value: ".."}}, VolumeMounts: []v1.VolumeMount{tt.vm}}
			if tt.priv {
				c.SecurityContext = &v1.SecurityContext{Privileged: ptr(true)}
			}
			_, err := m.Mounts(pod, c)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("something was created outside the volume: %v", entries)
	}
}

func TestTearDownWithoutMounts(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, _, root := newManager(t)
	pod := testPod(
		v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: outside}}},
	)
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	// A symlink out of the pod directory is removed, never followed.
	if err := os.Symlink(outside, filepath.Join(root, "pods/uid-1/volumes", PluginEmptyDir, "cache", "link")); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDown(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods/uid-1")); !os.IsNotExist(err) {
		t.Fatalf("pod dir left: %v", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "k" {
		t.Fatalf("hostPath content touched: %q %v", b, err)
	}
	if err := m.TearDown(ctx, pod.UID); err != nil {
		t.Fatalf("second TearDown: %v", err)
	}
	for _, bad := range []types.UID{"", "..", "a/b", "."} {
		if err := m.TearDown(ctx, bad); err == nil {
			t.Errorf("TearDown(%q) accepted", bad)
		}
	}
}

func unixTime(s int64) time.Time { return time.Unix(s, 0) }
