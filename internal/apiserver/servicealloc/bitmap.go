// Package servicealloc hands out Service cluster IPs and node ports from fixed
// ranges, as upstream's ipallocator and portallocator do: each range is a bitmap
// kept in one storage key (a core/v1 RangeAllocation, as upstream's
// /registry/ranges/serviceips and /registry/ranges/servicenodeports) and changed
// only by compare-and-swap, so that API servers sharing one etcd never hand out
// the same value twice. Repair rebuilds a bitmap from the existing Services.
//
// Dynamic allocation is sequential: the lowest free value of the upper
// ("dynamic") band first, then the lowest free value of the lower ("static")
// band, which upstream reserves preferentially for values clients ask for.
package servicealloc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/storage"
)

// Errors of an allocation, worded as upstream's.
var (
	// ErrAllocated means the requested value is already taken.
	ErrAllocated = errors.New("provided IP is already allocated")
	// ErrFull means no value is free.
	ErrFull = errors.New("range is full")
)

// NotInRangeError means a requested value lies outside the range.
type NotInRangeError struct {
	// What is "IP" or "port"; Range is the range as text.
	What, Range string
}

func (e *NotInRangeError) Error() string {
	return fmt.Sprintf("provided %s is not in the valid range. The range of valid %ss is %s", e.What, e.What, e.Range)
}

// maxAttempts bounds the compare-and-swap retries of one change.
const maxAttempts = 1000

// Bitmap is a set of offsets [0, Size) kept in one storage key.
type Bitmap struct {
	store     storage.Store
	key       string
	rangeText string
	size      int
	static    int // offsets below static form the static band
	allocated error

	mu   sync.Mutex
	last *storage.KeyValue // the last state seen, tried first
}

// NewBitmap returns a bitmap of size offsets stored at key, whose RangeAllocation
// names rangeText. allocatedErr is returned for a taken offset.
func NewBitmap(store storage.Store, key, rangeText string, size, staticBand int, allocatedErr error) *Bitmap {
	return &Bitmap{store: store, key: key, rangeText: rangeText, size: size, static: staticBand, allocated: allocatedErr}
}

// Size is the number of offsets.
func (b *Bitmap) Size() int { return b.size }

// staticBandSize is upstream's size of the lower band: between min and max, size/div.
func staticBandSize(size, lo, hi, div int) int {
	n := size / div
	if n < lo {
		n = lo
	}
	if n > hi {
		n = hi
	}
	if n > size {
		n = size
	}
	return n
}

// state is a decoded bitmap with the revision it was read at (0: absent).
type state struct {
	bits *big.Int
	rev  int64
}

func (b *Bitmap) decode(kv storage.KeyValue) (state, error) {
	var ra corev1.RangeAllocation
	if err := json.Unmarshal(kv.Value, &ra); err != nil {
		return state{}, fmt.Errorf("decode range allocation %s: %w", b.key, err)
	}
	return state{bits: new(big.Int).SetBytes(ra.Data), rev: kv.ModRevision}, nil
}

func (b *Bitmap) encode(bits *big.Int) ([]byte, error) {
	ra := corev1.RangeAllocation{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "RangeAllocation"},
		ObjectMeta: metav1.ObjectMeta{Name: b.key},
		Range:      b.rangeText, Data: bits.Bytes(),
	}
	return json.Marshal(&ra)
}

// read returns the current state from storage (an absent key is an empty bitmap).
func (b *Bitmap) read(ctx context.Context) (state, error) {
	kv, err := b.store.Get(ctx, b.key)
	if errors.Is(err, storage.ErrNotFound) {
		return state{bits: new(big.Int)}, nil
	}
	if err != nil {
		return state{}, fmt.Errorf("read %s: %w", b.key, err)
	}
	b.remember(kv)
	return b.decode(kv)
}

func (b *Bitmap) remember(kv storage.KeyValue) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil || kv.ModRevision >= b.last.ModRevision {
		b.last = &kv
	}
}

func (b *Bitmap) cached() (state, bool) {
	b.mu.Lock()
	kv := b.last
	b.mu.Unlock()
	if kv == nil {
		return state{}, false
	}
	st, err := b.decode(*kv)
	return st, err == nil
}

// change applies fn to the bitmap and writes it with compare-and-swap, retrying on
// conflicts. fn reports whether it changed anything; an error from fn is final
// only when it was computed on a state read from storage (not a possibly stale cache).
func (b *Bitmap) change(ctx context.Context, fn func(bits *big.Int) (bool, error)) error {
	st, fresh := b.cached()
	if !fresh {
		var err error
		if st, err = b.read(ctx); err != nil {
			return err
		}
	}
	fresh = !fresh
	for attempt := 0; attempt < maxAttempts; attempt++ {
		bits := new(big.Int).Set(st.bits)
		changed, err := fn(bits)
		if err != nil || !changed {
			if fresh {
				return err
			}
			if st, err = b.read(ctx); err != nil {
				return err
			}
			fresh = true
			continue
		}
		data, err := b.encode(bits)
		if err != nil {
			return fmt.Errorf("encode range allocation %s: %w", b.key, err)
		}
		var rev int64
		if st.rev == 0 {
			rev, err = b.store.Create(ctx, b.key, data)
		} else {
			rev, err = b.store.Update(ctx, b.key, data, st.rev)
		}
		if err == nil {
			b.remember(storage.KeyValue{Key: b.key, Value: data, ModRevision: rev})
			return nil
		}
		var ce *storage.ConflictError
		switch {
		case errors.As(err, &ce):
			b.remember(ce.Current)
			if st, err = b.decode(ce.Current); err != nil {
				return err
			}
		case errors.Is(err, storage.ErrExists), errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
			if st, err = b.read(ctx); err != nil {
				return err
			}
		default:
			return fmt.Errorf("write %s: %w", b.key, err)
		}
		fresh = true
	}
	return fmt.Errorf("write %s: too many concurrent changes", b.key)
}

// Allocate takes offset off, or returns the allocated error when it is taken.
func (b *Bitmap) Allocate(ctx context.Context, off int) error {
	if off < 0 || off >= b.size {
		return fmt.Errorf("offset %d outside the bitmap of %d", off, b.size)
	}
	return b.change(ctx, func(bits *big.Int) (bool, error) {
		if bits.Bit(off) == 1 {
			return false, b.allocated
		}
		bits.SetBit(bits, off, 1)
		return true, nil
	})
}

// AllocateNext takes the next free offset (see the package doc) or returns ErrFull.
func (b *Bitmap) AllocateNext(ctx context.Context) (int, error) {
	got := -1
	err := b.change(ctx, func(bits *big.Int) (bool, error) {
		got = b.nextFree(bits, nil)
		if got < 0 {
			return false, ErrFull
		}
		bits.SetBit(bits, got, 1)
		return true, nil
	})
	if err != nil {
		return -1, err
	}
	return got, nil
}

func (b *Bitmap) nextFree(bits *big.Int, skip map[int]bool) int {
	for i := b.static; i < b.size; i++ {
		if bits.Bit(i) == 0 && !skip[i] {
			return i
		}
	}
	for i := 0; i < b.static; i++ {
		if bits.Bit(i) == 0 && !skip[i] {
			return i
		}
	}
	return -1
}

// Release frees offsets (freeing a free offset is not an error).
func (b *Bitmap) Release(ctx context.Context, offs ...int) error {
	if len(offs) == 0 {
		return nil
	}
	return b.change(ctx, func(bits *big.Int) (bool, error) {
		changed := false
		for _, off := range offs {
			if off >= 0 && off < b.size && bits.Bit(off) == 1 {
				bits.SetBit(bits, off, 0)
				changed = true
			}
		}
		return changed, nil
	})
}

// Has reports whether off is taken, read from storage.
func (b *Bitmap) Has(ctx context.Context, off int) (bool, error) {
	st, err := b.read(ctx)
	if err != nil {
		return false, err
	}
	return st.bits.Bit(off) == 1, nil
}

// PeekNext returns the offset AllocateNext would take now, without taking it, passing over
// the offsets in skip (a dry run's earlier picks).
func (b *Bitmap) PeekNext(ctx context.Context, skip map[int]bool) (int, error) {
	st, err := b.read(ctx)
	if err != nil {
		return -1, err
	}
	if n := b.nextFree(st.bits, skip); n >= 0 {
		return n, nil
	}
	return -1, ErrFull
}

// Free returns how many offsets are free, read from storage.
func (b *Bitmap) Free(ctx context.Context) (int, error) {
	st, err := b.read(ctx)
	if err != nil {
		return 0, err
	}
	used := 0
	for _, w := range st.bits.Bits() {
		for ; w != 0; w &= w - 1 {
			used++
		}
	}
	return b.size - used, nil
}

// Rebuild rewrites the bitmap from the offsets in use (as listed by used, called after
// the bitmap was read so that a value allocated before the list is seen in one of the
// two) and returns the offsets that were taken without being in use. Such a leak stays
// taken until it was seen in keepRuns consecutive rebuilds (leaks counts them between
// calls), since a Service being created holds its values before it is stored.
func (b *Bitmap) Rebuild(ctx context.Context, used func(context.Context) (map[int]bool, error), leaks map[int]int, keepRuns int) error {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		st, err := b.read(ctx)
		if err != nil {
			return err
		}
		inUse, err := used(ctx)
		if err != nil {
			return err
		}
		bits := new(big.Int)
		for off := range inUse {
			if off >= 0 && off < b.size {
				bits.SetBit(bits, off, 1)
			}
		}
		var leaked []int
		for off := 0; off < st.bits.BitLen() && off < b.size; off++ {
			if st.bits.Bit(off) == 1 && !inUse[off] {
				leaked = append(leaked, off)
				if leaks[off]+1 < keepRuns {
					bits.SetBit(bits, off, 1)
				}
			}
		}
		if bits.Cmp(st.bits) != 0 || st.rev == 0 {
			data, err := b.encode(bits)
			if err != nil {
				return fmt.Errorf("encode range allocation %s: %w", b.key, err)
			}
			var rev int64
			if st.rev == 0 {
				rev, err = b.store.Create(ctx, b.key, data)
			} else {
				rev, err = b.store.Update(ctx, b.key, data, st.rev)
			}
			if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrExists) || errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", b.key, err)
			}
			b.remember(storage.KeyValue{Key: b.key, Value: data, ModRevision: rev})
		}
		seen := map[int]bool{}
		for _, off := range leaked {
			seen[off] = true
			leaks[off]++
			if leaks[off] >= keepRuns {
				delete(leaks, off)
			}
		}
		for off := range leaks {
			if !seen[off] {
				delete(leaks, off)
			}
		}
		return nil
	}
	return fmt.Errorf("rebuild %s: too many concurrent changes", b.key)
}
