package runc

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// chunkWriter records every Write separately, to check each entry is written whole.
type chunkWriter struct {
	mu     sync.Mutex
	writes []string
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func fixedClock() time.Time { return time.Date(2016, 10, 6, 0, 17, 9, 669794202, time.UTC) }

func TestCRILogFormat(t *testing.T) {
	long := strings.Repeat("x", MaxLogLine)
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lines", "a\nb\n", []string{"F a", "F b"}},
		{"empty line", "\n", []string{"F "}},
		{"crlf", "a\r\n", []string{"F a"}},
		{"last line without newline", "a\nb", []string{"F a", "P b"}},
		{"only a partial line", "DONE", []string{"P DONE"}},
		{"exactly max", long + "\n", []string{"P " + long, "F "}},
		{"longer than max", long + long + "yz\n", []string{"P " + long, "P " + long, "F yz"}},
		{"nothing", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &chunkWriter{}
			l := &criLog{w: w, now: fixedClock}
			if err := l.copyStream(strings.NewReader(tc.in), "stdout"); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, e := range tc.want {
				want = append(want, "2016-10-06T00:17:09.669794202Z stdout "+e+"\n")
			}
			if strings.Join(w.writes, "|") != strings.Join(want, "|") {
				t.Errorf("writes = %q, want %q", w.writes, want)
			}
		})
	}
}

// TestCRILogInterleavedStreams checks two streams copied at once never mix within a line.
func TestCRILogInterleavedStreams(t *testing.T) {
	var buf bytes.Buffer
	l := &criLog{w: &buf, now: fixedClock}
	var wg sync.WaitGroup
	for _, s := range []string{"stdout", "stderr"} {
		pr, pw := io.Pipe()
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := l.copyStream(pr, s); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				_, _ = io.WriteString(pw, strings.Repeat(s[3:], 100)+"\n")
			}
			pw.Close()
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d lines, want 1000", len(lines))
	}
	for _, line := range lines {
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 || f[3] != strings.Repeat(f[1][3:], 100) {
			t.Fatalf("mixed line %q", line)
		}
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

func TestCRILogKeepsDrainingOnWriteError(t *testing.T) {
	l := &criLog{w: failWriter{}, now: fixedClock}
	r := strings.NewReader(strings.Repeat("line\n", 10000))
	if err := l.copyStream(r, "stdout"); err != io.ErrShortWrite {
		t.Errorf("err = %v, want the write error", err)
	}
	if r.Len() != 0 {
		t.Errorf("%d bytes left unread: the container would block", r.Len())
	}
}
