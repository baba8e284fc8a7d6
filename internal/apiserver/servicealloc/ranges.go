package servicealloc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kubette/kubette/internal/storage"
)

// Storage keys of the two bitmaps, as upstream's.
const (
	IPsKey   = "/registry/ranges/serviceips"
	PortsKey = "/registry/ranges/servicenodeports"
)

// ErrPortAllocated means the requested node port is already taken.
var ErrPortAllocated = errors.New("provided port is already allocated")

// IPs allocates addresses of an IPv4 range, leaving out its network and broadcast addresses.
type IPs struct {
	prefix netip.Prefix
	base   uint32 // the first usable address
	bits   *Bitmap
}

// ParseCIDR reads a service IP range such as 10.96.0.0/12 (IPv4, at most /30).
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("service IP range %q: %w", s, err)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("service IP range %q: only IPv4 ranges are supported", s)
	}
	if p.Bits() > 30 {
		return netip.Prefix{}, fmt.Errorf("service IP range %q: too small (at most /30)", s)
	}
	return p.Masked(), nil
}

// NewIPs returns the allocator of prefix (from ParseCIDR), kept in store at IPsKey.
func NewIPs(store storage.Store, prefix netip.Prefix) *IPs {
	a := prefix.Addr().As4()
	base := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	size := int(uint64(1)<<(32-prefix.Bits())) - 2
	return &IPs{prefix: prefix, base: base + 1,
		bits: NewBitmap(store, IPsKey, prefix.String(), size, staticBandSize(size, 16, 256, 16), ErrAllocated)}
}

// Prefix is the range.
func (a *IPs) Prefix() netip.Prefix { return a.prefix }

// Bitmap is the underlying bitmap.
func (a *IPs) Bitmap() *Bitmap { return a.bits }

// First is the first usable address (the kubernetes Service's).
func (a *IPs) First() netip.Addr { return a.addr(0) }

func (a *IPs) addr(off int) netip.Addr {
	v := a.base + uint32(off)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Offset returns ip's offset, or a *NotInRangeError.
func (a *IPs) Offset(ip netip.Addr) (int, error) {
	ip = ip.Unmap()
	if !ip.Is4() || !a.prefix.Contains(ip) {
		return -1, &NotInRangeError{What: "IP", Range: a.prefix.String()}
	}
	b := ip.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	off := int(int64(v) - int64(a.base))
	if off < 0 || off >= a.bits.Size() {
		return -1, &NotInRangeError{What: "IP", Range: a.prefix.String()}
	}
	return off, nil
}

// Allocate takes ip: ErrAllocated when taken, *NotInRangeError outside the range.
func (a *IPs) Allocate(ctx context.Context, ip netip.Addr) error {
	off, err := a.Offset(ip)
	if err != nil {
		return err
	}
	return a.bits.Allocate(ctx, off)
}

// AllocateNext takes a free address, or returns ErrFull.
func (a *IPs) AllocateNext(ctx context.Context) (netip.Addr, error) {
	off, err := a.bits.AllocateNext(ctx)
	if err != nil {
		return netip.Addr{}, err
	}
	return a.addr(off), nil
}

// Check reports without taking anything whether ip could be allocated now (dry runs).
func (a *IPs) Check(ctx context.Context, ip netip.Addr) error {
	off, err := a.Offset(ip)
	if err != nil {
		return err
	}
	taken, err := a.bits.Has(ctx, off)
	if err != nil {
		return err
	}
	if taken {
		return ErrAllocated
	}
	return nil
}

// PeekNext returns the address AllocateNext would take now (dry runs).
func (a *IPs) PeekNext(ctx context.Context) (netip.Addr, error) {
	off, err := a.bits.PeekNext(ctx, nil)
	if err != nil {
		return netip.Addr{}, err
	}
	return a.addr(off), nil
}

// Release frees addresses; those outside the range are ignored.
func (a *IPs) Release(ctx context.Context, ips ...netip.Addr) error {
	var offs []int
	for _, ip := range ips {
		if off, err := a.Offset(ip); err == nil {
			offs = append(offs, off)
		}
	}
	return a.bits.Release(ctx, offs...)
}

// PortRange is a range of node ports, both ends included.
type PortRange struct {
	Base, Size int
}

// ParsePortRange reads "30000-32767" (or a single port).
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		hi = lo
	}
	l, err1 := strconv.Atoi(strings.TrimSpace(lo))
	h, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil || l < 1 || h > 65535 || h < l {
		return PortRange{}, fmt.Errorf("node port range %q: want FROM-TO within 1-65535", s)
	}
	return PortRange{Base: l, Size: h - l + 1}, nil
}

// String is "FROM-TO".
func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1) }

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.Base && port < r.Base+r.Size }

// Ports allocates node ports of a range.
type Ports struct {
	r    PortRange
	bits *Bitmap
}

// NewPorts returns the allocator of r, kept in store at PortsKey.
func NewPorts(store storage.Store, r PortRange) *Ports {
	return &Ports{r: r, bits: NewBitmap(store, PortsKey, r.String(), r.Size, staticBandSize(r.Size, 16, 128, 32), ErrPortAllocated)}
}

// Range is the port range.
func (a *Ports) Range() PortRange { return a.r }

// Bitmap is the underlying bitmap.
func (a *Ports) Bitmap() *Bitmap { return a.bits }

func (a *Ports) offset(port int) (int, error) {
	if !a.r.Contains(port) {
		return -1, &NotInRangeError{What: "port", Range: a.r.String()}
	}
	return port - a.r.Base, nil
}

// Allocate takes port: ErrPortAllocated when taken, *NotInRangeError outside the range.
func (a *Ports) Allocate(ctx context.Context, port int) error {
	off, err := a.offset(port)
	if err != nil {
		return err
	}
	return a.bits.Allocate(ctx, off)
}

// AllocateNext takes a free port, or returns ErrFull.
func (a *Ports) AllocateNext(ctx context.Context) (int, error) {
	off, err := a.bits.AllocateNext(ctx)
	if err != nil {
		return 0, err
	}
	return a.r.Base + off, nil
}

// Check reports without taking anything whether port could be allocated now (dry runs).
func (a *Ports) Check(ctx context.Context, port int) error {
	off, err := a.offset(port)
	if err != nil {
		return err
	}
	taken, err := a.bits.Has(ctx, off)
	if err != nil {
		return err
	}
	if taken {
		return ErrPortAllocated
	}
	return nil
}

// PeekNext returns the port AllocateNext would take now, passing over the ports in skip
// (a dry run's earlier picks).
func (a *Ports) PeekNext(ctx context.Context, skip map[int]bool) (int, error) {
	offs := map[int]bool{}
	for p := range skip {
		if off, err := a.offset(p); err == nil {
			offs[off] = true
		}
	}
	off, err := a.bits.PeekNext(ctx, offs)
	if err != nil {
		return 0, err
	}
	return a.r.Base + off, nil
}

// Release frees ports; those outside the range are ignored.
func (a *Ports) Release(ctx context.Context, ports ...int) error {
	var offs []int
	for _, p := range ports {
		if off, err := a.offset(p); err == nil {
			offs = append(offs, off)
		}
	}
	return a.bits.Release(ctx, offs...)
}
