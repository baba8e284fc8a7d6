package stats

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const meminfo = "MemTotal:       1000 kB\nMemFree:         200 kB\nInactive(file):  100 kB\nAnonPages:       300 kB\n"

func TestCgroupNodeV1(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cg/cpuacct/cpuacct.usage":        "123456789\n",
		"cg/memory/memory.usage_in_bytes": "819200\n",
		"cg/memory/memory.stat":           "cache 1\ntotal_inactive_file 204800\ntotal_rss 409600\n",
		"proc/meminfo":                    meminfo,
		"proc/stat":                       "cpu  1 2 3\nbtime 1700000000\n",
	})
	s, err := CgroupNode(filepath.Join(root, "cg"), filepath.Join(root, "proc"), root)()
	if err != nil {
		t.Fatal(err)
	}
	if *s.CPUUsageCoreNanoSeconds != 123456789 || *s.UsageBytes != 819200 || *s.WorkingSetBytes != 614400 ||
		*s.RSSBytes != 409600 || *s.AvailableBytes != 1024000-614400 || s.StartTime.Unix() != 1700000000 {
		t.Errorf("sample = cpu %d usage %d ws %d rss %d avail %d start %v", *s.CPUUsageCoreNanoSeconds, *s.UsageBytes,
			*s.WorkingSetBytes, *s.RSSBytes, *s.AvailableBytes, s.StartTime)
	}
	if s.Fs == nil || *s.Fs.CapacityBytes == 0 {
		t.Errorf("fs = %+v", s.Fs)
	}
}

func TestCgroupNodeV2(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cg/cgroup.controllers": "cpu memory\n",
		"cg/cpu.stat":           "usage_usec 5000\nuser_usec 4000\n",
		"proc/meminfo":          meminfo,
	})
	s, err := CgroupNode(filepath.Join(root, "cg"), filepath.Join(root, "proc"), "")()
	if err != nil {
		t.Fatal(err)
	}
	if *s.CPUUsageCoreNanoSeconds != 5_000_000 || *s.UsageBytes != 800*1024 || *s.WorkingSetBytes != 700*1024 ||
		*s.RSSBytes != 300*1024 || *s.AvailableBytes != 300*1024 || s.Fs != nil {
		t.Errorf("sample = %+v", s)
	}
}

func TestCgroupNodeNothing(t *testing.T) {
	if _, err := CgroupNode(t.TempDir(), t.TempDir(), "")(); err == nil {
		t.Error("no cgroup files but no error")
	}
}
