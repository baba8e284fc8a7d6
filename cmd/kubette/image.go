package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kubette/kubette/internal/runtime/image"
)

// newImage is `kubette image`: the built-in runtime's image store from the command line.
func newImage() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Load and list the images of the built-in container runtime",
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", defaultDataDir(), "kubette's data directory (images live in DATA_DIR/runtime/images)")
	open := func() (*image.Store, error) { return image.Open(filepath.Join(dataDir, "runtime", "images")) }
	cmd.AddCommand(&cobra.Command{
		Use:   "load FILE...",
		Short: "Load images from docker-archive (docker save) or OCI layout tarballs; - reads standard input",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			for _, f := range files {
				if err := loadImages(cmd, s, f); err != nil {
					return err
				}
			}
			return nil
		},
	}, newImageImport(open), &cobra.Command{
		Use:   "ls",
		Short: "List images as crictl images does",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			return printImages(cmd.OutOrStdout(), s.List())
		},
	})
	return cmd
}

func loadImages(cmd *cobra.Command, s *image.Store, file string) error {
	var r io.Reader = cmd.InOrStdin()
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		defer f.Close()
		r = f
	}
	imgs, err := s.Load(cmd.Context(), r)
	if err != nil {
		return fmt.Errorf("load %s: %w", file, err)
	}
	for _, img := range imgs {
		if len(img.RepoTags) == 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "Loaded image ID: %s\n", img.ID)
		}
		for _, t := range img.RepoTags {
			fmt.Fprintf(cmd.OutOrStdout(), "Loaded image: %s\n", t)
		}
	}
	return nil
}

// printImages writes the table of `crictl images`: one row per tag (an untagged image once,
// with <none>), the first 13 characters of the ID, sizes in decimal units.
func printImages(w io.Writer, imgs []image.Image) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tTAG\tIMAGE ID\tSIZE")
	for _, img := range imgs {
		id := strings.TrimPrefix(img.ID, "sha256:")
		if len(id) > 13 {
			id = id[:13]
		}
		size := humanSize(img.Size)
		if len(img.RepoTags) == 0 {
			repo := "<none>"
			if len(img.RepoDigests) > 0 {
				repo, _, _ = strings.Cut(img.RepoDigests[0], "@")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", repo, "<none>", id, size)
		}
		for _, t := range img.RepoTags {
			i := strings.LastIndex(t, ":")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t[:i], t[i+1:], id, size)
		}
	}
	return tw.Flush()
}

// humanSize formats bytes with three significant digits in decimal units, as crictl does
// ("2.27MB").
func humanSize(n uint64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB"}
	v := float64(n)
	i := 0
	for v >= 1000 && i < len(units)-1 {
		v /= 1000
		i++
	}
	return fmt.Sprintf("%.3g%s", v, units[i])
}

// newImageImport is `kubette image import TARBALL NAME`: a one-layer image of a root
// filesystem tarball, as `docker import` makes.
func newImageImport(open func() (*image.Store, error)) *cobra.Command {
	var opts image.ImportOptions
	cmd := &cobra.Command{
		Use:   "import TARBALL NAME[:TAG]",
		Short: "Make a one-layer image of a root filesystem tarball (as docker import), e.g. a static busybox with its applets",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			img, err := s.Import(cmd.Context(), args[0], args[1], opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Imported image: %s (%s)\n", strings.Join(img.RepoTags, ", "), img.ID)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&opts.Cmd, "cmd", nil, "the image's default command")
	cmd.Flags().StringSliceVar(&opts.Entrypoint, "entrypoint", nil, "the image's entrypoint")
	cmd.Flags().StringSliceVar(&opts.Env, "env", nil, "the image's environment (KEY=VALUE; default a standard PATH)")
	cmd.Flags().StringVar(&opts.WorkingDir, "workdir", "", "the image's working directory")
	return cmd
}
