package runc

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// MaxLogLine is the longest log line content written as one entry; a longer line is split into
// partial ("P") entries, as containerd's max_container_log_line_size default.
const MaxLogLine = 16 * 1024

// criLog writes container output in the CRI log format, one whole line per Write:
//
//	2016-10-06T00:17:09.669794202Z stdout F text
type criLog struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// writeEntry writes one entry; partial marks a piece of a longer line.
func (l *criLog) writeEntry(stream string, partial bool, content []byte) error {
	tag := "F"
	if partial {
		tag = "P"
	}
	buf := make([]byte, 0, len(content)+64)
	buf = l.now().UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ')
	buf = append(buf, tag...)
	buf = append(buf, ' ')
	buf = append(buf, content...)
	buf = append(buf, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(buf)
	return err
}

// copyStream copies r into the log as stream ("stdout" or "stderr") until r ends. Line ends
// ("\n", "\r\n") are not part of an entry's content; a last line without a newline is written
// as a partial entry, as containerd does, so that readers give back exactly what the container
// wrote ("echo -n DONE" logs "DONE", not "DONE\n"). When the log cannot be written it keeps
// reading (so the container never blocks on a full pipe) and returns the first write error at
// the end.
func (l *criLog) copyStream(r io.Reader, stream string) error {
	br := bufio.NewReaderSize(r, MaxLogLine)
	var werr error
	write := func(partial bool, content []byte) {
		if werr == nil {
			werr = l.writeEntry(stream, partial, content)
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			// A piece of a longer line. A '\r' at its end may begin a "\r\n": it goes with
			// the next piece.
			if n := len(line); n > 1 && line[n-1] == '\r' {
				if uerr := br.UnreadByte(); uerr == nil {
					line = line[:n-1]
				}
			}
			write(true, line)
			continue
		case err == nil:
			line = line[:len(line)-1]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			write(false, line)
			continue
		case len(line) > 0:
			write(true, line) // the stream ended within a line
		}
		if err == io.EOF {
			return werr
		}
		return err
	}
}
