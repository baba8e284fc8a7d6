package ingress

import (
	"fmt"
	"os"
	"path/filepath"
)

// prepareDirs creates nginx's directories under prefix: conf, logs, certs
// (0700: it holds private keys), run (0700: the control socket, for root
// only) and the temp directories.
func prepareDirs(prefix string) error {
	for _, d := range []string{"conf", "logs", "certs", "run", "tmp/client_body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o700); err != nil {
			return fmt.Errorf("create nginx directory: %w", err)
		}
	}
	return nil
}
