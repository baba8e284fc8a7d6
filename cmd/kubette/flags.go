package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/logging"
	"github.com/kubette/kubette/internal/runtime/image"
)

// newLogger parses a --log-level value (debug, info, warn or error) into the one logger of the
// process: kubette's compact text format on stderr, which klog, the standard library's log,
// gRPC and etcd write through too (logging.Route).
func newLogger(level string) (*slog.Logger, error) {
	l, err := logging.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	logger := logging.New(os.Stderr, l)
	logging.Route(logger)
	return logger, nil
}

// restConfig loads the client configuration of a --kubeconfig file.
func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// clusterConfig loads the client configuration of a command run by a person: --kubeconfig,
// else $KUBECONFIG, else DATA_DIR/admin.kubeconfig.
func clusterConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		kubeconfig = filepath.Join(defaultDataDir(), "admin.kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// clusterClient is a clientset over clusterConfig(kubeconfig).
func clusterClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clusterConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return client, nil
}

// insecureRegistryFlag is --insecure-registry: repeatable, each value one entry or several
// separated by commas, each checked as it is parsed (image.ParseRegistries).
type insecureRegistryFlag struct{ list *[]string }

// insecureRegistryUsage is the flag's help, shared by `runtime` and `up`.
const insecureRegistryUsage = "a registry pulls may reach over plain HTTP and whose HTTPS certificate is not verified: " +
	"host (any port), host:port, [ipv6]:port or a CIDR of registry addresses (names are not resolved); " +
	"repeatable or comma-separated. localhost and loopback registries may use plain HTTP anyway"

// String is the entries so far, comma-separated.
func (f insecureRegistryFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, ",")
}

// Set adds the comma-separated entries of v, or none if one is malformed.
func (f insecureRegistryFlag) Set(v string) error {
	entries := strings.Split(v, ",")
	for i := range entries {
		entries[i] = strings.TrimSpace(entries[i])
	}
	if _, err := image.ParseRegistries(entries); err != nil {
		return err
	}
	*f.list = append(*f.list, entries...)
	return nil
}

// Type is the value's name in the help.
func (f insecureRegistryFlag) Type() string { return "host[:port]" }
