package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ElementWriter is a Runner that can also write set and map elements
// through netlink, into the network namespace its nft runs in: nft parses
// a hundred thousand elements in about a second of CPU, netlink takes them
// in a tenth of that (bench/proxy/README.md).
type ElementWriter interface {
	Runner
	// CanWriteElements reports whether WriteElements reaches the namespace
	// nft runs in.
	CanWriteElements() bool
	// ListTable lists the proxy's table: chains and sets by name, and the
	// generation its services chain uses.
	ListTable(ctx context.Context) (Listing, error)
	// WriteElements adds the elements of the shared sets among sets (the
	// fixed sets and the endpoint maps, named with suffix in the kernel,
	// where they exist) in one netlink transaction.
	WriteElements(ctx context.Context, suffix string, sets []Set) error
}

var _ ElementWriter = ExecRunner{}

// errNoNetns says an ExecRunner's Prefix is not one whose namespace
// WriteElements can open.
var errNoNetns = errors.New("the runner's prefix names no network namespace netlink can enter")

// netnsPath is the namespace nft runs in: "" for this process's own
// (no Prefix), /var/run/netns/NAME for the Prefix `ip netns exec NAME`.
func (r ExecRunner) netnsPath() (string, error) {
	switch {
	case len(r.Prefix) == 0:
		return "", nil
	case len(r.Prefix) == 4 && r.Prefix[0] == "ip" && r.Prefix[1] == "netns" && r.Prefix[2] == "exec" &&
		r.Prefix[3] != "" && !strings.ContainsRune(r.Prefix[3], '/'):
		return filepath.Join("/var/run/netns", r.Prefix[3]), nil
	}
	return "", errNoNetns
}

// CanWriteElements implements ElementWriter: no Prefix or `ip netns exec
// NAME`.
func (r ExecRunner) CanWriteElements() bool {
	_, err := r.netnsPath()
	return err == nil
}

// conn opens a netlink connection to nf_tables in the runner's namespace
// whose send buffer holds sndbuf bytes (the kernel takes a batch in one
// message; SO_SNDBUFFORCE goes above wmem_max, as nft does); done releases
// it.
func (r ExecRunner) conn(sndbuf int) (*gnft.Conn, func(), error) {
	path, err := r.netnsPath()
	if err != nil {
		return nil, nil, err
	}
	var opts []gnft.ConnOption
	done := func() {}
	if path != "" {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("open network namespace %s: %w", path, err)
		}
		done = func() { unix.Close(fd) }
		opts = append(opts, gnft.WithNetNSFd(fd))
	}
	opts = append(opts, gnft.WithSockOptions(func(c *netlink.Conn) error {
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sndbuf)
		}); err != nil {
			return err
		}
		return serr
	}))
	conn, err := gnft.New(opts...)
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("netlink connection: %w", err)
	}
	return conn, done, nil
}

// ListTable implements ElementWriter through netlink: the table's chains
// and sets by name, without their elements (`nft -t list table` reads and
// decodes every element: 1.7 s of CPU at 10000 Services), and the
// generation the services chain looks up. A missing table lists empty.
func (r ExecRunner) ListTable(ctx context.Context) (Listing, error) {
	l := Listing{Sets: map[string]string{}}
	if err := ctx.Err(); err != nil {
		return l, err
	}
	conn, done, err := r.conn(1 << 20)
	if err != nil {
		return l, err
	}
	defer done()
	tables, err := conn.ListTablesOfFamily(gnft.TableFamilyIPv4)
	if err != nil {
		return l, fmt.Errorf("list tables: %w", err)
	}
	var table *gnft.Table
	for _, t := range tables {
		if t.Name == Table {
			table = t
		}
	}
	if table == nil {
		return l, nil
	}
	chains, err := conn.ListChainsOfTableFamily(gnft.TableFamilyIPv4)
	if err != nil {
		return l, fmt.Errorf("list chains: %w", err)
	}
	for _, c := range chains {
		if c.Table != nil && c.Table.Name == Table {
			l.Chains = append(l.Chains, c.Name)
		}
	}
	sets, err := conn.GetSets(table)
	if err != nil {
		return l, fmt.Errorf("list sets: %w", err)
	}
	for _, s := range sets {
		if s.Anonymous {
			continue
		}
		l.Sets[s.Name] = "set"
		if s.IsMap {
			l.Sets[s.Name] = "map"
		}
	}
	if slices.Contains(l.Chains, ChainServices) {
		rules, err := conn.GetRules(table, &gnft.Chain{Name: ChainServices, Table: table})
		if err != nil {
			return l, fmt.Errorf("list the rules of %s: %w", ChainServices, err)
		}
		for _, rule := range rules {
			for _, e := range rule.Exprs {
				if lk, ok := e.(*expr.Lookup); ok && strings.HasPrefix(lk.SetName, MapServiceIPs) {
					l.InUse = strings.TrimPrefix(lk.SetName, MapServiceIPs)
				}
			}
		}
	}
	return l, nil
}

// elementsPerMessage bounds the elements of one netlink message.
const elementsPerMessage = 1000

// WriteElements implements ElementWriter with one netlink batch (one
// transaction): a NEWSETELEM message per elementsPerMessage elements.
func (r ExecRunner) WriteElements(ctx context.Context, suffix string, sets []Set) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	size := 1 << 20
	for _, s := range sets {
		size += 96 * len(s.Elements)
	}
	conn, done, err := r.conn(size)
	if err != nil {
		return err
	}
	defer done()
	table := &gnft.Table{Name: Table, Family: gnft.TableFamilyIPv4}
	n := 0
	for i := range sets {
		s := &sets[i]
		if !isShared(s.Name) || len(s.Elements) == 0 {
			continue
		}
		layout, err := elementLayout(s.Name)
		if err != nil {
			return err
		}
		target := &gnft.Set{Table: table, Name: named(s.Name, suffix), IsMap: s.Kind == "map"}
		for j := 0; j < len(s.Elements); j += elementsPerMessage {
			chunk := s.Elements[j:min(j+elementsPerMessage, len(s.Elements))]
			els, err := encodeElements(layout, chunk, suffix)
			if err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
			if err := conn.SetAddElements(target, els); err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
			n += len(chunk)
		}
	}
	if n == 0 {
		return nil
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("write %d set elements through netlink: %w", n, err)
	}
	return nil
}

// field is one part of a concatenated key or value, each in a 4-byte
// register as the kernel compares them.
type field int

const (
	fieldAddr  field = iota // IPv4 address
	fieldProto              // protocol name (tcp, udp, sctp) or number
	fieldPort               // port, network byte order
	fieldIndex              // numgen's endpoint index, host byte order
)

// layout is how a shared set's keys and values are built: key fields, and
// value fields of a data map or verdict for a verdict map (neither for a
// set).
type layout struct {
	key     []field
	value   []field
	verdict bool
}

func elementLayout(name string) (layout, error) {
	if f, _, ok := parseEndpointMap(name); ok {
		key := []field{fieldAddr, fieldProto, fieldPort, fieldIndex}
		if endpointFamilies[f] == FamilyNodePortEndpoints {
			key = key[1:]
		}
		return layout{key: key, value: []field{fieldAddr, fieldPort}}, nil
	}
	switch name {
	case MapServiceIPs, MapNoEndpointServices:
		return layout{key: []field{fieldAddr, fieldProto, fieldPort}, verdict: true}, nil
	case MapServiceNodePorts, MapNoEndpointNodePorts:
		return layout{key: []field{fieldProto, fieldPort}, verdict: true}, nil
	case SetFirewallIPs:
		return layout{key: []field{fieldAddr, fieldProto, fieldPort}}, nil
	case SetNodePortIPs:
		return layout{key: []field{fieldAddr}}, nil
	case SetHairpin:
		return layout{key: []field{fieldAddr, fieldAddr}}, nil
	}
	return layout{}, fmt.Errorf("no element layout for set %s", name)
}

// encodeElements encodes elements' keys and values (as the renderer
// prints them) into netlink set elements, the chains of verdicts named in
// generation sfx.
func encodeElements(l layout, els []Element, sfx string) ([]gnft.SetElement, error) {
	out := make([]gnft.SetElement, len(els))
	arena := make([]byte, 0, len(els)*4*(len(l.key)+len(l.value)))
	for i, e := range els {
		start := len(arena)
		var err error
		if arena, err = encodeFields(arena, l.key, e.Key); err != nil {
			return nil, fmt.Errorf("key %q: %w", e.Key, err)
		}
		out[i].Key = arena[start:len(arena):len(arena)]
		switch {
		case l.verdict:
			v, err := parseVerdict(namedVerdict(e.Value, sfx))
			if err != nil {
				return nil, fmt.Errorf("element %q: %w", e.Key, err)
			}
			out[i].VerdictData = v
		case len(l.value) > 0:
			start = len(arena)
			if arena, err = encodeFields(arena, l.value, e.Value); err != nil {
				return nil, fmt.Errorf("value %q of %q: %w", e.Value, e.Key, err)
			}
			out[i].Val = arena[start:len(arena):len(arena)]
		}
	}
	return out, nil
}

// encodeFields appends the registers of s, fields joined by " . ".
func encodeFields(b []byte, fields []field, s string) ([]byte, error) {
	for k, f := range fields {
		part := s
		if k < len(fields)-1 {
			var ok bool
			part, s, ok = strings.Cut(s, " . ")
			if !ok {
				return b, fmt.Errorf("want %d fields", len(fields))
			}
		}
		var reg [4]byte
		switch f {
		case fieldAddr:
			a, err := netip.ParseAddr(part)
			if err != nil || !a.Is4() {
				return b, fmt.Errorf("bad IPv4 address %q", part)
			}
			reg = a.As4()
		case fieldProto:
			switch part {
			case "tcp":
				reg[0] = unix.IPPROTO_TCP
			case "udp":
				reg[0] = unix.IPPROTO_UDP
			case "sctp":
				reg[0] = unix.IPPROTO_SCTP
			default:
				n, err := strconv.ParseUint(part, 10, 8)
				if err != nil {
					return b, fmt.Errorf("bad protocol %q", part)
				}
				reg[0] = byte(n)
			}
		case fieldPort:
			n, err := strconv.ParseUint(part, 10, 16)
			if err != nil {
				return b, fmt.Errorf("bad port %q", part)
			}
			binary.BigEndian.PutUint16(reg[:2], uint16(n))
		case fieldIndex:
			n, err := strconv.ParseUint(part, 10, 32)
			if err != nil {
				return b, fmt.Errorf("bad index %q", part)
			}
			binary.NativeEndian.PutUint32(reg[:], uint32(n))
		}
		b = append(b, reg[:]...)
	}
	return b, nil
}

// parseVerdict parses a verdict map value: "goto CHAIN", "jump CHAIN",
// "drop", "accept" or "return".
func parseVerdict(v string) (*expr.Verdict, error) {
	switch verb, chain, _ := strings.Cut(v, " "); verb {
	case "goto":
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: chain}, nil
	case "jump":
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}, nil
	case "drop":
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case "accept":
		return &expr.Verdict{Kind: expr.VerdictAccept}, nil
	case "return":
		return &expr.Verdict{Kind: expr.VerdictReturn}, nil
	}
	return nil, fmt.Errorf("unknown verdict %q", v)
}
