package server

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Stream names of the CRI log format.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Entry is one line of a CRI log file: `<RFC3339Nano time> <stdout|stderr> <P|F>[:tags] <text>`.
// A partial entry (tag P) is continued by the next entry of the same stream; a full entry (tag F)
// ends a line.
type Entry struct {
	Time    time.Time
	Stream  string
	Partial bool
	// Log is the text without the line's newline. ParseLine returns a slice of its input.
	Log []byte
}

// ParseLine parses one line of a CRI log file. A trailing newline is dropped; a missing
// separator after the tag is accepted when the text is empty.
func ParseLine(line []byte) (Entry, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	var e Entry
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return e, errors.New("CRI log line: no timestamp separator")
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return e, fmt.Errorf("CRI log line: timestamp %q: %w", ts, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return e, errors.New("CRI log line: no stream separator")
	}
	switch string(stream) {
	case StreamStdout:
		e.Stream = StreamStdout
	case StreamStderr:
		e.Stream = StreamStderr
	default:
		return e, fmt.Errorf("CRI log line: unknown stream %q", stream)
	}
	tags, text, _ := bytes.Cut(rest, []byte{' '})
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	switch string(tag) {
	case "P":
		e.Partial = true
	case "F":
	default:
		return e, fmt.Errorf("CRI log line: unknown tag %q", tag)
	}
	e.Time, e.Log = t, text
	return e, nil
}

// AppendLine appends e in the CRI log format, newline included, to dst. e.Log must not
// contain a newline.
func AppendLine(dst []byte, e Entry) []byte {
	dst = e.Time.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, ' ')
	dst = append(dst, e.Stream...)
	if e.Partial {
		dst = append(dst, " P "...)
	} else {
		dst = append(dst, " F "...)
	}
	dst = append(dst, e.Log...)
	return append(dst, '\n')
}
