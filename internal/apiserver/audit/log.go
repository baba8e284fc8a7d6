package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Sink receives the events of requests. Process must not keep ev's maps or slices
// beyond what it writes: the filter hands over an event it no longer changes.
type Sink interface {
	Process(ev *Event)
}

// The log formats, as upstream's --audit-log-format.
const (
	FormatJSON   = "json"
	FormatLegacy = "legacy"
)

// LogConfig configures the audit log file, as upstream's --audit-log-* flags.
type LogConfig struct {
	// Path is the file; "-" is standard output.
	Path string
	// MaxAge is how many days rotated files are kept (0: no limit).
	MaxAge int
	// MaxBackups is how many rotated files are kept (0: no limit).
	MaxBackups int
	// MaxSize is the size in megabytes at which the file is rotated (0: lumberjack's 100).
	MaxSize int
	// Compress gzips rotated files.
	Compress bool
	// Format is json (one Event object per line; the default) or legacy (one line of
	// text per event).
	Format string
	// BufferSize is how many events wait for the writer before requests block (default 10000).
	BufferSize int
	// Stdout is where "-" writes (default os.Stdout).
	Stdout io.Writer
}

// Log writes events to a file from one goroutine. Create it with NewLog.
type Log struct {
	ch      chan *Event
	stopped chan struct{}
	out     io.Writer
	closer  io.Closer
	legacy  bool
	log     *slog.Logger
}

var _ Sink = (*Log)(nil)

// NewLog opens the log file and starts the writer, which runs until ctx is done: it then
// writes the events still buffered, closes the file and closes Done.
func NewLog(ctx context.Context, cfg LogConfig, logger *slog.Logger) (*Log, error) {
	if logger == nil {
		logger = slog.Default()
	}
	l := &Log{stopped: make(chan struct{}), log: logger}
	switch cfg.Format {
	case "", FormatJSON:
	case FormatLegacy:
		l.legacy = true
	default:
		return nil, fmt.Errorf("audit log format %q: want json or legacy", cfg.Format)
	}
	if cfg.MaxAge < 0 || cfg.MaxBackups < 0 || cfg.MaxSize < 0 {
		return nil, fmt.Errorf("audit log: --audit-log-maxage, --audit-log-maxbackup and --audit-log-maxsize must not be negative")
	}
	switch cfg.Path {
	case "":
		return nil, fmt.Errorf("audit log: no path")
	case "-":
		l.out = cfg.Stdout
		if l.out == nil {
			l.out = os.Stdout
		}
	default:
		if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o700); err != nil {
			return nil, fmt.Errorf("audit log directory: %w", err)
		}
		// Open it now, so that a path that cannot be written fails at start-up.
		f, err := os.OpenFile(cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open audit log: %w", err)
		}
		_ = f.Close()
		lj := &lumberjack.Logger{Filename: cfg.Path, MaxAge: cfg.MaxAge, MaxBackups: cfg.MaxBackups, MaxSize: cfg.MaxSize, Compress: cfg.Compress}
		l.out, l.closer = lj, lj
	}
	n := cfg.BufferSize
	if n <= 0 {
		n = 10000
	}
	l.ch = make(chan *Event, n)
	go l.run(ctx)
	return l, nil
}

// Process queues ev for writing. It waits while the buffer is full (as upstream's
// blocking mode), and drops ev once the writer has stopped.
func (l *Log) Process(ev *Event) {
	select {
	case l.ch <- ev:
	case <-l.stopped:
	}
}

// Done is closed when the writer has written the last events and closed the file.
func (l *Log) Done() <-chan struct{} { return l.stopped }

// batchBytes is how much the writer gathers before writing: whole lines only, so that a
// rotation never splits one.
const batchBytes = 64 << 10

func (l *Log) run(ctx context.Context) {
	defer close(l.stopped)
	var buf bytes.Buffer
	var failed bool
	report := func(err error) {
		if err != nil && !failed {
			l.log.Error("write the audit log", "err", err)
		}
		failed = err != nil
	}
	flush := func() {
		if buf.Len() > 0 {
			_, err := l.out.Write(buf.Bytes())
			report(err)
			buf.Reset()
		}
	}
	// drain writes what is waiting, then flushes once.
	drain := func() {
		for {
			select {
			case ev := <-l.ch:
				report(l.encode(&buf, ev))
				if buf.Len() >= batchBytes {
					flush()
				}
			default:
				flush()
				return
			}
		}
	}
	for {
		select {
		case ev := <-l.ch:
			report(l.encode(&buf, ev))
			drain()
		case <-ctx.Done():
			drain()
			if l.closer != nil {
				report(l.closer.Close())
			}
			return
		}
	}
}

// encode appends ev's line to buf.
func (l *Log) encode(buf *bytes.Buffer, ev *Event) error {
	if l.legacy {
		buf.WriteString(legacyLine(ev))
		return nil
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode audit event %s: %w", ev.AuditID, err)
	}
	buf.Write(b)
	buf.WriteByte('\n')
	return nil
}

// legacyLine is upstream's legacy text format: the time, then id, stage, ip, method,
// user, groups, as, asgroups, user-agent, namespace, uri and response, quoted.
func legacyLine(ev *Event) string {
	user, groups := "<none>", "<none>"
	if ev.User.Username != "" {
		user = ev.User.Username
		if len(ev.User.Groups) > 0 {
			groups = quoteList(ev.User.Groups)
		}
	}
	as, asGroups := "<self>", "<lookup>"
	if ev.ImpersonatedUser != nil {
		as = ev.ImpersonatedUser.Username
		if ev.ImpersonatedUser.Groups != nil {
			asGroups = quoteList(ev.ImpersonatedUser.Groups)
		}
	}
	ns := "<none>"
	if ev.ObjectRef != nil && ev.ObjectRef.Namespace != "" {
		ns = ev.ObjectRef.Namespace
	}
	response := "<deferred>"
	if ev.ResponseStatus != nil {
		response = strconv.Itoa(int(ev.ResponseStatus.Code))
	}
	ip := "<unknown>"
	if len(ev.SourceIPs) > 0 {
		ip = ev.SourceIPs[0]
	}
	return fmt.Sprintf("%s AUDIT: id=%q stage=%q ip=%q method=%q user=%q groups=%q as=%q asgroups=%q user-agent=%q namespace=%q uri=%q response=\"%s\"\n",
		ev.RequestReceivedTimestamp.Format(time.RFC3339Nano), ev.AuditID, ev.Stage, ip, ev.Verb, user, groups, as, asGroups,
		ev.UserAgent, ns, ev.RequestURI, response)
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ",")
}
