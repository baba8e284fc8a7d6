package nftables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// Runner runs the nft tool.
type Runner interface {
	// Nft runs nft with args and stdin (nil: none) and returns its output.
	Nft(ctx context.Context, stdin []byte, args ...string) ([]byte, error)
}

// ExecRunner runs the nft binary found on PATH, prefixed with Prefix when
// set (e.g. "ip", "netns", "exec", NAME to work inside a network namespace).
type ExecRunner struct {
	Prefix []string
}

// ErrNoNft says the nft binary is not installed.
var ErrNoNft = errors.New("nft binary not found (Debian package nftables)")

// Nft implements Runner.
func (r ExecRunner) Nft(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, ErrNoNft
	}
	argv := append(append(append([]string(nil), r.Prefix...), "nft"), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := stderr.String()
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return stdout.Bytes(), fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(msg))
	}
	return stdout.Bytes(), nil
}

// Applier keeps the host's table in line with rendered models: the first
// sync, and any after a failure, replaces the whole table in one transaction;
// the others write only what changed since the last success. Not safe for
// concurrent use.
type Applier struct {
	run      Runner
	renderer *Renderer
	applied  *Ruleset
}

// NewApplier returns an Applier that runs nft through r.
func NewApplier(r Runner) *Applier {
	return &Applier{run: r, renderer: NewRenderer()}
}

// Result says what a Sync wrote.
type Result struct {
	// Full is true when the whole table was written.
	Full bool
	// Bytes is the size of the nft input; 0 when nothing changed.
	Bytes int
}

// InstallGuard makes sure the guard chain holds o's rules and is jumped to
// from filter-forward and filter-output, without touching the rest of a
// table a previous run left (it keeps serving until the first full sync).
func (a *Applier) InstallGuard(ctx context.Context, o iptables.Options) error {
	guard := GuardChain(o)
	out, err := a.run.Nft(ctx, nil, "list", "chain", "ip", Table, "filter-output")
	if err == nil && strings.Contains(string(out), "jump "+ChainGuard) {
		var b bytes.Buffer
		declareChain(&b, &guard, "")
		b.WriteString("flush chain " + prefix + guard.Name + "\n")
		addRules(&b, &guard, "")
		_, err = a.run.Nft(ctx, b.Bytes(), "-f", "-")
	} else {
		_, err = a.run.Nft(ctx, GuardText(guard), "-f", "-")
	}
	if err != nil {
		return fmt.Errorf("install the service CIDR guard: %w", err)
	}
	return nil
}

// Sync renders m under o and writes it: everything when full is set or
// nothing was applied yet (or the last apply failed), else the difference
// to the last applied ruleset.
func (a *Applier) Sync(ctx context.Context, m iptables.Model, o iptables.Options, full bool) (Result, error) {
	rs := a.renderer.Render(m, o)
	if !full && a.applied != nil {
		rs.suffix = a.applied.suffix // the generation the shared sets are in
		text, ok := UpdateText(a.applied, rs)
		if ok && len(text) == 0 {
			a.applied = rs // the same rules: later updates derive from it
			return Result{}, nil
		}
		if ok {
			a.applied = nil // unknown until nft succeeded
			if _, err := a.run.Nft(ctx, text, "-f", "-"); err != nil {
				return Result{}, fmt.Errorf("apply nftables rules: %w", err)
			}
			a.applied = rs
			return Result{Bytes: len(text)}, nil
		}
	}
	a.applied = nil
	n, err := a.fullSync(ctx, rs)
	if err != nil {
		return Result{Full: true}, fmt.Errorf("apply nftables rules: %w", err)
	}
	a.applied = rs
	return Result{Full: true, Bytes: n}, nil
}

// Generation suffixes of the shared sets and the endpoint maps' chains
// written by a full sync through netlink: the one not in use.
const (
	suffixA = "__a"
	suffixB = "__b"
)

// fullSync replaces whatever the table holds with rs and returns the bytes
// written. Packets see the old rules or the new ones, never a mix or a
// moment without either:
//
//   - A Runner that cannot write elements through netlink gets FullText:
//     one transaction that deletes the table and builds it again.
//   - Otherwise the shared sets (the fixed sets and the endpoint maps:
//     nearly all the elements) and the endpoint maps' chains are written as
//     a new generation of themselves, named with the suffix the table does
//     not use: (0) nft deletes what a failed full sync left of that
//     generation; (1) nft declares the table, every chain (the verdict
//     maps' targets), the new generation's sets and its endpoint chains
//     with their rules; (2) one netlink transaction adds the sets'
//     elements; (3) one nft transaction flushes every other chain, writes
//     the rules of the fixed and the Services' chains again (now referring
//     to the new generation), declares the Services' own sets again, and
//     deletes the old generation and every chain and set the ruleset no
//     longer has. Steps 0 to 2 change nothing a packet sees: no rule refers
//     to the new generation before step 3.
func (a *Applier) fullSync(ctx context.Context, rs *Ruleset) (int, error) {
	ew, ok := a.run.(ElementWriter)
	if !ok || !ew.CanWriteElements() {
		rs.suffix = ""
		text := FullText(rs)
		if _, err := a.run.Nft(ctx, text, "-f", "-"); err != nil {
			return 0, err
		}
		return len(text), nil
	}
	have, err := ew.ListTable(ctx)
	if err != nil {
		return 0, err
	}
	rs.suffix = suffixA
	if have.InUse == suffixA {
		rs.suffix = suffixB
	}
	n := 0
	if left := LeftoverText(have, rs.suffix); len(left) > 0 {
		if _, err := a.run.Nft(ctx, left, "-f", "-"); err != nil {
			return 0, fmt.Errorf("delete a failed sync's leftovers: %w", err)
		}
		n += len(left)
		for name := range have.Sets {
			if strings.HasSuffix(name, rs.suffix) {
				delete(have.Sets, name)
			}
		}
		have.Chains = slices.DeleteFunc(have.Chains, func(c string) bool { return strings.HasSuffix(c, rs.suffix) })
	}
	prepare := PrepareText(rs)
	if _, err := a.run.Nft(ctx, prepare, "-f", "-"); err != nil {
		return 0, fmt.Errorf("declare the new generation: %w", err)
	}
	if err := ew.WriteElements(ctx, rs.suffix, rs.Sets[:rs.shared]); err != nil {
		return 0, err
	}
	sw := SwitchText(rs, have)
	if _, err := a.run.Nft(ctx, sw, "-f", "-"); err != nil {
		return 0, fmt.Errorf("switch to the new generation: %w", err)
	}
	return n + len(prepare) + len(sw), nil
}

// Cleanup deletes the proxy's table; a host without it (or without nft) is
// clean already.
func Cleanup(ctx context.Context, r Runner) error {
	_, err := r.Nft(ctx, []byte("add table "+prefix[:len(prefix)-1]+"\ndelete table "+prefix[:len(prefix)-1]+"\n"), "-f", "-")
	if errors.Is(err, ErrNoNft) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete the nftables table %s: %w", Table, err)
	}
	return nil
}
