// Package logging is the one log format of every kubette command: a compact text
// handler for log/slog that a person reads at a glance (time, level, component,
// message, key=values), and the routing that sends the other loggers of the
// process through it: klog (client-go and the other k8s.io libraries), the
// standard library's log package, gRPC's logger, and etcd's zap logger.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// ComponentKey is the attribute that names the component a line comes from
// (logger.With(ComponentKey, "proxy")); the handler prints it as a column.
const ComponentKey = "component"

// TimeFormat is how the handler prints a line's time: the time of day, to the
// millisecond, in the machine's zone.
const TimeFormat = "15:04:05.000"

// ParseLevel parses a --log-level value: debug, info, warn or error (as
// slog.Level's text form, so "warn+1" works too).
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error: %w", s, err)
	}
	return l, nil
}

// New returns a logger writing lines of the compact format to w, from level up.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(NewHandler(w, level))
}

// Handler writes one line per record:
//
//	23:40:01.123 INFO  proxy: proxy started mode=iptables serviceCIDR=10.96.0.0/12
//
// Values that hold spaces, quotes, '=' or control characters, and empty ones,
// are quoted; attributes of groups are prefixed with the group's name and a dot.
// It is safe for concurrent use; clones made by WithAttrs and WithGroup share
// the writer and its lock.
type Handler struct {
	out       *output
	level     slog.Leveler
	component string
	prefix    string // the open groups, each followed by a dot
	attrs     []byte // preformatted " key=value" of WithAttrs
}

type output struct {
	mu sync.Mutex
	w  io.Writer
}

var _ slog.Handler = (*Handler)(nil)

// NewHandler returns a Handler writing to w from level up (nil: info).
func NewHandler(w io.Writer, level slog.Leveler) *Handler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &Handler{out: &output{w: w}, level: level}
}

// Enabled reports whether records of level l are written.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// WithAttrs returns a handler whose lines carry attrs; a ComponentKey attribute
// (outside groups) becomes the line's component.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]byte(nil), h.attrs...)
	for _, a := range attrs {
		if h.prefix == "" && a.Key == ComponentKey {
			c.component = a.Value.Resolve().String()
			continue
		}
		c.attrs = appendAttr(c.attrs, h.prefix, a)
	}
	return &c
}

// WithGroup returns a handler that qualifies the keys of later attributes with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

// Handle writes r as one line.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	buf := make([]byte, 0, 256)
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	buf = t.AppendFormat(buf, TimeFormat)
	buf = append(buf, ' ')
	buf = append(buf, levelText(r.Level)...)
	component := h.component
	var rest []byte
	r.Attrs(func(a slog.Attr) bool {
		if h.prefix == "" && a.Key == ComponentKey {
			component = a.Value.Resolve().String()
			return true
		}
		rest = appendAttr(rest, h.prefix, a)
		return true
	})
	buf = append(buf, ' ')
	if component != "" {
		buf = append(buf, component...)
		buf = append(buf, ": "...)
	}
	buf = append(buf, strings.TrimRight(r.Message, "\n")...)
	buf = append(buf, h.attrs...)
	buf = append(buf, rest...)
	buf = append(buf, '\n')
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := h.out.w.Write(buf)
	return err
}

// levelText is a level padded to five characters: DEBUG, INFO , WARN , ERROR
// (others as slog writes them, e.g. WARN+2).
func levelText(l slog.Level) string {
	switch l {
	case slog.LevelDebug:
		return "DEBUG"
	case slog.LevelInfo:
		return "INFO "
	case slog.LevelWarn:
		return "WARN "
	case slog.LevelError:
		return "ERROR"
	}
	return l.String()
}

// appendAttr appends " key=value" for a (a group's members each with the
// group's prefix); empty attributes are left out, as slog's handlers do.
func appendAttr(buf []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return buf
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, m := range a.Value.Group() {
			buf = appendAttr(buf, p, m)
		}
		return buf
	}
	buf = append(buf, ' ')
	buf = append(buf, prefix...)
	buf = append(buf, a.Key...)
	buf = append(buf, '=')
	var s string
	switch a.Value.Kind() {
	case slog.KindTime:
		s = a.Value.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprint(a.Value.Any())
		}
	default:
		s = a.Value.String()
	}
	if needsQuote(s) {
		return strconv.AppendQuote(buf, s)
	}
	return append(buf, s...)
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if unicode.IsSpace(r) || r == '"' || r == '=' || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}
