// Package e2e holds kubette's end-to-end tests: they build the real kubette
// binary once, start clusters with `kubette up` (and `kubette apiserver`
// against a real external etcd), and drive them with the real kubectl, checking
// what kubectl prints the way a user would see it.
//
// Run them with
//
//	go test ./test/e2e/ -count=1 -v
//
// They need kubectl on PATH and, for the external-etcd test, /usr/bin/etcd and
// etcdctl (Debian: apt-get install etcd-server etcd-client). Without kubectl
// every test is skipped, unless CI=true, where a missing tool is a failure.
// `go test -short` skips them too.
//
// Every test starts its own cluster on free ports and its own data directory,
// so the tests run in parallel; kubectl runs with HOME and KUBECACHEDIR in a
// temporary directory, so no discovery cache is shared between runs.
package e2e
