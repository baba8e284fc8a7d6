package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// File is one file of a volume's payload: its content and permission bits.
type File struct {
	Data []byte
	Mode os.FileMode
	// GID, when set, is the file's group (the pod's fsGroup); else the writer's.
	GID *int64
}

const (
	dataDirName    = "..data"     // the symlink to the current timestamped directory
	newDataDirName = "..data_tmp" // the symlink renamed over dataDirName
)

// WriteAtomic makes dir hold exactly payload (relative path → file) so that readers see either
// the old or the new content, never a mix: the files go into a fresh timestamped directory
// "..<time>.<random>", the "..data" symlink is swapped to it with a rename, and every top-level
// name of the payload is a symlink through "..data". Old timestamped directories and names
// that left the payload are removed. An unchanged payload writes nothing. It reports whether
// anything changed.
func WriteAtomic(dir string, payload map[string]File) (bool, error) {
	clean := make(map[string]File, len(payload))
	for p, f := range payload {
		if err := validatePayloadPath(p); err != nil {
			return false, err
		}
		clean[filepath.Clean(p)] = f
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("create volume dir %s: %w", dir, err)
	}
	oldTS, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s link: %w", dataDirName, err)
	}
	if oldTS != "" && sameContent(filepath.Join(dir, oldTS), clean) && linksPresent(dir, clean) {
		return false, nil
	}

	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, fmt.Errorf("create timestamped dir in %s: %w", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tsDir)
		}
	}()
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return false, fmt.Errorf("chmod %s: %w", tsDir, err)
	}
	for p, f := range clean {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return false, fmt.Errorf("create dir for %s: %w", p, err)
		}
		if err := os.WriteFile(full, f.Data, f.Mode.Perm()); err != nil {
			return false, fmt.Errorf("write %s: %w", p, err)
		}
		// WriteFile's mode is masked by the umask; the volume's mode is exact.
		if f.GID != nil {
			if err := os.Lchown(full, -1, int(*f.GID)); err != nil {
				return false, fmt.Errorf("chown %s: %w", p, err)
			}
		}
		if err := os.Chmod(full, f.Mode.Perm()); err != nil {
			return false, fmt.Errorf("chmod %s: %w", p, err)
		}
	}

	tmpLink := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return false, fmt.Errorf("link new data dir: %w", err)
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		_ = os.Remove(tmpLink)
		return false, fmt.Errorf("swap %s link: %w", dataDirName, err)
	}
	ok = true

	// Top-level names: a symlink through ..data for each; anything else visible goes.
	want := map[string]bool{}
	for p := range clean {
		want[strings.SplitN(p, string(filepath.Separator), 2)[0]] = true
	}
	for name := range want {
		link := filepath.Join(dir, name)
		target := filepath.Join(dataDirName, name)
		if cur, err := os.Readlink(link); err == nil && cur == target {
			continue
		}
		if err := os.RemoveAll(link); err != nil {
			return true, fmt.Errorf("replace %s: %w", link, err)
		}
		if err := os.Symlink(target, link); err != nil {
			return true, fmt.Errorf("link %s: %w", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return true, fmt.Errorf("read %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == dataDirName || name == filepath.Base(tsDir):
		case strings.HasPrefix(name, ".."):
			// Earlier timestamped dirs and a stale ..data_tmp.
			errs = append(errs, os.RemoveAll(filepath.Join(dir, name)))
		case !want[name]:
			errs = append(errs, os.RemoveAll(filepath.Join(dir, name)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return true, fmt.Errorf("remove old files of %s: %w", dir, err)
	}
	return true, nil
}

// validatePayloadPath rejects a payload path that is empty, absolute or reaches out with "..",
// or whose first element starts with ".." (reserved for the writer's own names).
func validatePayloadPath(p string) error {
	if p == "" {
		return errors.New("invalid path: must not be empty")
	}
	if filepath.IsAbs(p) {
		return fmt.Errorf("invalid path %q: must be relative", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
	}
	if strings.HasPrefix(p, "..") {
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	return nil
}

// sameContent tells whether tsDir holds exactly payload, byte for byte and mode for mode.
func sameContent(tsDir string, payload map[string]File) bool {
	found := map[string]bool{}
	err := filepath.WalkDir(tsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(tsDir, path)
		if err != nil {
			return err
		}
		f, ok := payload[rel]
		if !ok || !d.Type().IsRegular() {
			return errors.New("differs")
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm() != f.Mode.Perm() {
			return errors.New("differs")
		}
		if st, ok := info.Sys().(*syscall.Stat_t); f.GID != nil && (!ok || int64(st.Gid) != *f.GID) {
			return errors.New("differs")
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(b, f.Data) {
			return errors.New("differs")
		}
		found[rel] = true
		return nil
	})
	return err == nil && len(found) == len(payload)
}

// linksPresent tells whether every top-level name of payload is dir's symlink through ..data
// and nothing else is visible.
func linksPresent(dir string, payload map[string]File) bool {
	want := map[string]bool{}
	for p := range payload {
		want[strings.SplitN(p, string(filepath.Separator), 2)[0]] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	visible := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		visible++
		if !want[e.Name()] {
			return false
		}
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err != nil || t != filepath.Join(dataDirName, e.Name()) {
			return false
		}
	}
	return visible == len(want)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
