package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	v1 "k8s.io/api/core/v1"
)

// checkHostPath checks (and for the *OrCreate types creates) a hostPath volume's path as
// upstream's hostPath plugin does, with its error texts.
func checkHostPath(src *v1.HostPathVolumeSource) error {
	path := src.Path
	typ := v1.HostPathUnset
	if src.Type != nil {
		typ = *src.Type
	}
	info, statErr := os.Stat(path)
	exists := statErr == nil
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return fmt.Errorf("hostPath type check failed: %w", statErr)
	}
	mode := fs.FileMode(0)
	if exists {
		mode = info.Mode()
	}
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return fmt.Errorf("create hostPath directory %s: %w", path, err)
			}
			return nil
		}
		fallthrough
	case v1.HostPathDirectory:
		if !exists || !mode.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", path)
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return fmt.Errorf("create hostPath file %s: %w", path, err)
			}
			return f.Close()
		}
		fallthrough
	case v1.HostPathFile:
		if !exists || !mode.IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", path)
		}
	case v1.HostPathSocket:
		if !exists || mode&fs.ModeSocket == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", path)
		}
	case v1.HostPathCharDev:
		if !exists || mode&fs.ModeCharDevice == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", path)
		}
	case v1.HostPathBlockDev:
		if !exists || mode&fs.ModeDevice == 0 || mode&fs.ModeCharDevice != 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", path)
		}
	default:
		return fmt.Errorf("%s is an invalid volume type", typ)
	}
	return nil
}
