package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/kubette/kubette/internal/logquery"
)

// LogOptions are the query parameters of /containerLogs (package logquery).
type LogOptions = logquery.Options

// ParseLogOptions reads and validates the query of /containerLogs (logquery.Parse).
func ParseLogOptions(q url.Values, now time.Time) (LogOptions, error) { return logquery.Parse(q, now) }

// followPoll is how often a followed log file is checked for new data.
const followPoll = 250 * time.Millisecond

// logStream copies one CRI log file to an output as `kubectl logs` shows it.
type logStream struct {
	opts LogOptions
	out  io.Writer
	// flush pushes what was written to the client (nil: nothing to push).
	flush func()
	// finished reports, when following and at the end of the file, whether the file will not
	// grow any more; the stream then drains what is left and ends.
	finished func() bool

	atLineStart bool
	remaining   int64 // bytes left under LimitBytes; -1: no limit
	buf         []byte
}

// copyLog writes the log file at path to s.out per s.opts and returns when it is done, when
// following ends, or when ctx is done (then with nil: the client went away).
func (s *logStream) copyLog(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log %s: %w", path, err)
	}
	defer f.Close()
	var start int64
	if s.opts.TailLines != nil {
		if start, err = tailOffset(f, *s.opts.TailLines); err != nil {
			return err
		}
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("seek log %s: %w", path, err)
	}
	s.atLineStart, s.remaining = true, -1
	if s.opts.LimitBytes != nil {
		s.remaining = *s.opts.LimitBytes
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var pending []byte // a line read only in part so far (the writer has not finished it)
	draining := false
	for {
		chunk, err := r.ReadSlice('\n')
		pending = append(pending, chunk...)
		switch {
		case err == nil:
			done := s.entry(pending)
			pending = pending[:0]
			if done {
				s.doFlush()
				return nil
			}
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case !errors.Is(err, io.EOF):
			return fmt.Errorf("read log %s: %w", path, err)
		}
		s.doFlush()
		if !s.opts.Follow || draining {
			if len(pending) > 0 {
				s.entry(pending) // a last line without its newline
				s.doFlush()
			}
			return nil
		}
		if s.finished != nil && s.finished() {
			draining = true // read once more: what was written before the check
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

func (s *logStream) doFlush() {
	if s.flush != nil {
		s.flush()
	}
}

// entry writes one CRI log line; it reports true when LimitBytes is reached. Lines that do
// not parse are skipped, as upstream does.
func (s *logStream) entry(line []byte) (done bool) {
	e, err := ParseLine(line)
	if err != nil {
		return false
	}
	if s.opts.SinceTime != nil && e.Time.Before(*s.opts.SinceTime) {
		return false
	}
	out := s.buf[:0]
	if s.opts.Timestamps && s.atLineStart {
		out = e.Time.AppendFormat(out, time.RFC3339Nano)
		out = append(out, ' ')
	}
	out = append(out, e.Log...)
	if !e.Partial {
		out = append(out, '\n')
	}
	s.atLineStart = !e.Partial
	s.buf = out
	if s.remaining >= 0 && int64(len(out)) >= s.remaining {
		_, _ = s.out.Write(out[:s.remaining])
		s.remaining = 0
		return true
	}
	if s.remaining > 0 {
		s.remaining -= int64(len(out))
	}
	if _, err := s.out.Write(out); err != nil {
		return true // the client is gone
	}
	return false
}

// tailOffset returns the offset of the n-th last line of a CRI log file, counting a
// run of partial entries and the full entry that ends it as one line (a line still being
// written counts too).
func tailOffset(f *os.File, n int64) (int64, error) {
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("seek log: %w", err)
	}
	if n == 0 {
		return end, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seek log: %w", err)
	}
	starts := make([]int64, 0, min(n, 4096)) // ring of the last n line starts
	next := 0
	var count int64
	push := func(off int64) {
		if int64(len(starts)) < n {
			starts = append(starts, off)
		} else {
			starts[next] = off
			next = (next + 1) % len(starts)
		}
		count++
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var off int64
	lineStart := true
	var physical []byte
	for {
		chunk, err := r.ReadSlice('\n')
		physical = append(physical, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(physical) > 0 {
			e, perr := ParseLine(physical)
			if perr == nil {
				if lineStart {
					push(off)
				}
				lineStart = !e.Partial
			}
			off += int64(len(physical))
			physical = physical[:0]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read log: %w", err)
		}
	}
	if count <= n {
		if len(starts) == 0 {
			return 0, nil
		}
		return starts[0], nil
	}
	return starts[next], nil
}
