package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/kubette/kubette/internal/runtime/runc"
)

// newShim is the hidden `kubette shim` command the built-in runtime starts for each container
// (see package runc). Its flags are the shim's own, parsed by runc.ShimMain.
func newShim() *cobra.Command {
	return &cobra.Command{
		Use:                "shim",
		Short:              "Run one container under runc (started by the built-in runtime)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(runc.ShimMain(args))
		},
	}
}
