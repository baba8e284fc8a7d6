package logging

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
)

// Route makes l the process's one logger: slog's default (and with it the
// standard library's log package, whose lines become records at INFO), klog's
// output (component "klog"; its V-levels stay off, as klog's -v defaults to 0)
// and gRPC's (component "grpc"; its info and warning lines at DEBUG, as gRPC
// prints only errors by default). Those loggers are process-wide, so only a
// command's main calls Route, once, before any component starts.
func Route(l *slog.Logger) {
	slog.SetDefault(l)
	klog.SetSlogLogger(l.With(ComponentKey, "klog"))
	grpclog.SetLoggerV2(grpcLogger{l: l.With(ComponentKey, "grpc")})
}

// Zap returns a zap logger that writes through l's handler (etcd's server and
// client log with zap), at min and above.
func Zap(l *slog.Logger, min zapcore.Level) *zap.Logger {
	return zap.New(&zapCore{h: l.Handler(), min: min})
}

// zapCore is a zapcore.Core over a slog.Handler.
type zapCore struct {
	h   slog.Handler
	min zapcore.Level
}

var _ zapcore.Core = (*zapCore)(nil)

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// Enabled reports whether entries of level l are written.
func (c *zapCore) Enabled(l zapcore.Level) bool {
	return l >= c.min && c.h.Enabled(context.Background(), slogLevel(l))
}

// With returns a core whose entries carry fields.
func (c *zapCore) With(fields []zapcore.Field) zapcore.Core {
	return &zapCore{h: c.h.WithAttrs(fieldAttrs(fields)), min: c.min}
}

// Check adds c to ce when the entry's level is enabled.
func (c *zapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write hands the entry to the handler as a record.
func (c *zapCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(fieldAttrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

// Sync has nothing to flush: the handler writes each line at once.
func (c *zapCore) Sync() error { return nil }

// fieldAttrs turns zap fields into attributes, in key order.
func fieldAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	return attrs
}

// grpcLogger is gRPC's LoggerV2 over a slog logger.
type grpcLogger struct{ l *slog.Logger }

var _ grpclog.LoggerV2 = grpcLogger{}

func (g grpcLogger) log(level slog.Level, msg string) {
	g.l.Log(context.Background(), level, strings.TrimSpace(msg))
}

func (g grpcLogger) Info(args ...any)   { g.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Infoln(args ...any) { g.log(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g grpcLogger) Infof(format string, args ...any) {
	g.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Warning(args ...any)   { g.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Warningln(args ...any) { g.log(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g grpcLogger) Warningf(format string, args ...any) {
	g.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Error(args ...any)   { g.log(slog.LevelError, fmt.Sprint(args...)) }
func (g grpcLogger) Errorln(args ...any) { g.log(slog.LevelError, fmt.Sprintln(args...)) }
func (g grpcLogger) Errorf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
}

// Fatal, Fatalln and Fatalf log and exit, as gRPC's contract says.
func (g grpcLogger) Fatal(args ...any) { g.log(slog.LevelError, fmt.Sprint(args...)); os.Exit(1) }
func (g grpcLogger) Fatalln(args ...any) {
	g.log(slog.LevelError, fmt.Sprintln(args...))
	os.Exit(1)
}
func (g grpcLogger) Fatalf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// V reports whether gRPC's verbose logs at level l are on: only with debug.
func (g grpcLogger) V(l int) bool { return g.l.Enabled(context.Background(), slog.LevelDebug) }
