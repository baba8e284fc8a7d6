// Command kubette-shim is the built-in runtime's container shim (runc.ShimMain, the same code
// as the hidden `kubette shim` command) in a binary of its own that links nothing else: its
// start costs a tenth of the CPU of the kubette binary's. Install it beside kubette and the
// runtime starts it for every container:
//
//	go build -o /usr/local/bin/ ./cmd/kubette ./cmd/kubette-shim
//
// A kubette-shim of another protocol than the runtime's (a stale copy beside a newer
// kubette) is not used: the runtime asks it for its protocol first and falls back to
// `kubette shim`.
package main

import (
	"os"

	"github.com/kubette/kubette/internal/runtime/runc"
)

func main() {
	os.Exit(runc.ShimMain(os.Args[1:]))
}
