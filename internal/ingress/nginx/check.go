package nginx

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// CheckError is a configuration nginx -t rejected.
type CheckError struct {
	// Message is nginx's own message (its "[emerg]" line, without the
	// "nginx: " noise).
	Message string
	// File and Line locate the error when nginx said where (Line 0 otherwise).
	File string
	Line int
}

func (e *CheckError) Error() string { return "nginx rejected the configuration: " + e.Message }

var emergLine = regexp.MustCompile(`\[(?:emerg|alert|crit)\] (?:[0-9]+#[0-9]+: )?(.*)`)
var inFile = regexp.MustCompile(` in (\S+):(\d+)$`)

// Check runs `nginx -t` on the configuration file conf with prefix as nginx's
// prefix directory. It returns a *CheckError when nginx rejects it and another
// error when nginx could not be run.
func Check(ctx context.Context, binary, prefix, conf string) error {
	cmd := exec.CommandContext(ctx, binary, "-t", "-q", "-p", prefix+"/", "-e", "stderr", "-c", conf)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if _, ok := err.(*exec.ExitError); !ok || ctx.Err() != nil {
		return fmt.Errorf("run %s -t: %w", binary, err)
	}
	return parseCheckOutput(out.String())
}

func parseCheckOutput(out string) *CheckError {
	msg := strings.TrimSpace(out)
	for _, l := range strings.Split(out, "\n") {
		if m := emergLine.FindStringSubmatch(l); m != nil {
			msg = m[1]
			break
		}
	}
	e := &CheckError{Message: msg}
	if m := inFile.FindStringSubmatch(msg); m != nil {
		e.File = m[1]
		e.Line, _ = strconv.Atoi(m[2])
	}
	return e
}
