package server

import (
	"bytes"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	cases := []struct {
		in      string
		want    Entry
		wantErr bool
	}{
		{in: "2026-01-02T03:04:05.123456789Z stdout F hello world\n", want: Entry{Time: ts, Stream: "stdout", Log: []byte("hello world")}},
		{in: "2026-01-02T03:04:05.123456789Z stderr P part", want: Entry{Time: ts, Stream: "stderr", Partial: true, Log: []byte("part")}},
		{in: "2026-01-02T03:04:05.123456789Z stdout F \n", want: Entry{Time: ts, Stream: "stdout", Log: []byte{}}},
		{in: "2026-01-02T03:04:05.123456789Z stdout F", want: Entry{Time: ts, Stream: "stdout"}},
		{in: "2026-01-02T03:04:05.123456789Z stdout F:x:y  two  spaces ", want: Entry{Time: ts, Stream: "stdout", Log: []byte(" two  spaces ")}},
		{in: "2026-01-02T04:04:05.123456789+01:00 stdout F tz", want: Entry{Time: ts, Stream: "stdout", Log: []byte("tz")}},
		{in: "", wantErr: true},
		{in: "garbage stdout F x", wantErr: true},
		{in: "2026-01-02T03:04:05Z stdin F x", wantErr: true},
		{in: "2026-01-02T03:04:05Z stdout X x", wantErr: true},
		{in: "2026-01-02T03:04:05Z stdout", wantErr: true},
	}
	for _, c := range cases {
		got, err := ParseLine([]byte(c.in))
		if c.wantErr {
			if err == nil {
				t.Errorf("ParseLine(%q) = %+v, want an error", c.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLine(%q): %v", c.in, err)
			continue
		}
		if !got.Time.Equal(c.want.Time) || got.Stream != c.want.Stream || got.Partial != c.want.Partial || !bytes.Equal(got.Log, c.want.Log) {
			t.Errorf("ParseLine(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte("2026-01-02T03:04:05.123456789Z stdout F hello world\n"))
	f.Add([]byte("2026-01-02T03:04:05Z stderr P:a:b x y"))
	f.Add([]byte("2026-01-02T03:04:05+02:00 stdout F"))
	f.Add([]byte(" stdout F x"))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseLine(line)
		if err != nil {
			return
		}
		if e.Stream != StreamStdout && e.Stream != StreamStderr {
			t.Fatalf("stream %q accepted", e.Stream)
		}
		if bytes.IndexByte(e.Log, '\n') >= 0 || e.Time.Year() < 0 || e.Time.Year() > 9999 {
			return // AppendLine cannot represent these
		}
		again, err := ParseLine(AppendLine(nil, e))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", AppendLine(nil, e), err)
		}
		if !again.Time.Equal(e.Time) || again.Stream != e.Stream || again.Partial != e.Partial || !bytes.Equal(again.Log, e.Log) {
			t.Fatalf("round trip: %+v became %+v", e, again)
		}
	})
}
