package sim

import (
	"fmt"
	"math/bits"
	"net/netip"
)

// maxPoolAddresses bounds the addresses one node's pool tracks (a /16 of IPv4):
// a larger pod CIDR is used only up to this many addresses.
const maxPoolAddresses = 1 << 16

// subnet returns the i-th subnet of size /maskBits inside base (i counts from 0).
func subnet(base netip.Prefix, maskBits, i int) (netip.Prefix, error) {
	if !base.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("only IPv4 is supported, got %s", base)
	}
	if maskBits < base.Bits() || maskBits > 32 {
		return netip.Prefix{}, fmt.Errorf("a /%d subnet does not fit in %s", maskBits, base)
	}
	if i < 0 || uint64(i) >= subnetCount(base, maskBits) {
		return netip.Prefix{}, fmt.Errorf("%s holds %d /%d subnets, subnet %d does not exist", base, subnetCount(base, maskBits), maskBits, i)
	}
	a := base.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(i) << (32 - maskBits)
	return netip.PrefixFrom(addrFromUint32(v), maskBits), nil
}

// subnetCount is how many /maskBits subnets base holds.
func subnetCount(base netip.Prefix, maskBits int) uint64 {
	return uint64(1) << (maskBits - base.Bits())
}

// hostAddr returns the n-th address of p (n = 0 is the network address).
func hostAddr(p netip.Prefix, n uint32) netip.Addr {
	a := p.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	return addrFromUint32(v + n)
}

// hostIndex is the inverse of hostAddr; ok is false when ip is outside p.
func hostIndex(p netip.Prefix, ip netip.Addr) (uint32, bool) {
	if !p.Contains(ip) {
		return 0, false
	}
	a, b := p.Masked().Addr().As4(), ip.As4()
	base := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return v - base, true
}

func addrFromUint32(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// ipPool hands out the pod addresses of one node's pod CIDR, lowest free first,
// as a bitmap. The network address, the first host address (the gateway a CNI
// bridge takes) and the broadcast address are never handed out. It is not safe
// for concurrent use.
type ipPool struct {
	prefix netip.Prefix
	first  uint32 // first usable host index
	last   uint32 // last usable host index
	used   []uint64
	inUse  int
}

// newIPPool returns a pool over the usable addresses of p.
func newIPPool(p netip.Prefix) (*ipPool, error) {
	if !p.Addr().Is4() {
		return nil, fmt.Errorf("pod CIDR %s: only IPv4 is supported", p)
	}
	size := uint64(1) << (32 - p.Bits())
	if size < 8 {
		return nil, fmt.Errorf("pod CIDR %s is too small", p)
	}
	if size > maxPoolAddresses {
		size = maxPoolAddresses
	}
	last := uint32(size - 2) // size-1 is the broadcast address of a whole prefix
	return &ipPool{prefix: p.Masked(), first: 2, last: last, used: make([]uint64, (size+63)/64)}, nil
}

// capacity is how many addresses the pool can hand out.
func (p *ipPool) capacity() int { return int(p.last-p.first) + 1 }

// allocate returns the lowest free address; ok is false when the pool is exhausted.
func (p *ipPool) allocate() (netip.Addr, bool) {
	for w := p.first / 64; w <= p.last/64; w++ {
		free := ^p.used[w]
		if w == p.first/64 {
			free &^= (uint64(1) << (p.first % 64)) - 1
		}
		if free == 0 {
			continue
		}
		n := w*64 + uint32(bits.TrailingZeros64(free))
		if n > p.last {
			return netip.Addr{}, false
		}
		p.used[w] |= 1 << (n % 64)
		p.inUse++
		return hostAddr(p.prefix, n), true
	}
	return netip.Addr{}, false
}

// reserve marks ip as used (an address a pod already had when the simulator
// started); it reports false when ip is not one of the pool's addresses or is
// already in use.
func (p *ipPool) reserve(ip netip.Addr) bool {
	n, ok := p.index(ip)
	if !ok || p.used[n/64]&(1<<(n%64)) != 0 {
		return false
	}
	p.used[n/64] |= 1 << (n % 64)
	p.inUse++
	return true
}

// release returns ip to the pool; releasing a free or foreign address does nothing.
func (p *ipPool) release(ip netip.Addr) {
	n, ok := p.index(ip)
	if !ok || p.used[n/64]&(1<<(n%64)) == 0 {
		return
	}
	p.used[n/64] &^= 1 << (n % 64)
	p.inUse--
}

func (p *ipPool) index(ip netip.Addr) (uint32, bool) {
	n, ok := hostIndex(p.prefix, ip)
	if !ok || n < p.first || n > p.last {
		return 0, false
	}
	return n, true
}
