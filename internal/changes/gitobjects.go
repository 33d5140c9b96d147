package changes

import (
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// maxDeltaDepth bounds a chain of packed deltas (git makes them at most
// 50 deep by default); a longer one, or a cycle, is refused.
const maxDeltaDepth = 1000

// gitObjects reads a repository's object headers itself, so that what
// go-git would inflate is known before it runs. go-git trusts headers: it
// inflates a small object's whole zlib stream, whatever size the header
// declares, a packed delta's instructions whole to learn its size, and a
// delta's base whole to apply it. size reads headers only; check also
// inflates each stream an object needs once, streaming and no further
// than its declared size, and returns the bytes go-git may inflate to
// read it.
type gitObjects struct {
	dg    *dotgit.DotGit
	packs []gitPack
	// checked caches check's answers by object and by pack offset.
	checked map[any]objectCost
}

type gitPack struct {
	file billy.File
	idx  *idxfile.MemoryIndex
}

// objectCost is an object's content size and the bytes inflated to read
// it: its own streams and its delta bases'.
type objectCost struct {
	size, cost int64
}

// packOffset names an object by where it is in a pack.
type packOffset struct {
	pack int
	off  int64
}

var errObjectDamaged = errors.New("an object's stored size does not match its content")

func newGitObjects(fsys billy.Filesystem) (*gitObjects, error) {
	o := &gitObjects{dg: dotgit.New(fsys), checked: map[any]objectCost{}}
	hs, err := o.dg.ObjectPacks()
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		f, err := o.dg.ObjectPackIdx(h)
		if err != nil {
			o.close()
			return nil, err
		}
		idx := idxfile.NewMemoryIndex()
		err = idxfile.NewDecoder(f).Decode(idx)
		f.Close()
		if err != nil {
			o.close()
			return nil, err
		}
		pf, err := o.dg.ObjectPack(h)
		if err != nil {
			o.close()
			return nil, err
		}
		o.packs = append(o.packs, gitPack{file: pf, idx: idx})
	}
	return o, nil
}

func (o *gitObjects) close() {
	for _, p := range o.packs {
		p.file.Close()
	}
}

// size is object h's content size, from its headers: nothing is inflated
// but the first bytes of a packed delta.
func (o *gitObjects) size(h plumbing.Hash) (int64, error) {
	c, err := o.object(h, 0, false)
	return c.size, err
}

// check verifies the streams object h needs and returns its cost.
func (o *gitObjects) check(h plumbing.Hash) (objectCost, error) {
	return o.object(h, 0, true)
}

// object is h's size (and, with verify, its checked cost): the larger of
// its loose and packed copies, as go-git may read either.
func (o *gitObjects) object(h plumbing.Hash, depth int, verify bool) (objectCost, error) {
	if c, ok := o.checked[h]; ok {
		return c, nil
	}
	var c objectCost
	found := false
	if f, err := o.dg.Object(h); err == nil {
		c, err = looseCost(f, verify)
		f.Close()
		if err != nil {
			return objectCost{}, err
		}
		found = true
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, plumbing.ErrObjectNotFound) {
		return objectCost{}, err
	}
	for i, p := range o.packs {
		off, err := p.idx.FindOffset(h)
		if err != nil {
			continue
		}
		pc, err := o.packed(i, off, depth, verify)
		if err != nil {
			return objectCost{}, err
		}
		c.size, c.cost, found = max(c.size, pc.size), max(c.cost, pc.cost), true
	}
	if !found {
		return objectCost{}, plumbing.ErrObjectNotFound
	}
	if verify {
		o.checked[h] = c
	}
	return c, nil
}

// looseCost reads a loose object's header and, with verify, inflates it
// no further than the size it declares.
func looseCost(f billy.File, verify bool) (objectCost, error) {
	r, err := objfile.NewReader(f)
	if err != nil {
		return objectCost{}, err
	}
	defer r.Close()
	_, size, err := r.Header()
	if err != nil {
		return objectCost{}, err
	}
	if size < 0 {
		return objectCost{}, errObjectDamaged
	}
	if verify {
		if n, err := io.CopyN(io.Discard, r, size+1); n != size || !errors.Is(err, io.EOF) {
			return objectCost{}, errObjectDamaged
		}
	}
	return objectCost{size: size, cost: size}, nil
}

// packed reads the object at off of pack i: its header, a delta's target
// size and, with verify, its stream and its bases'.
func (o *gitObjects) packed(i int, off int64, depth int, verify bool) (objectCost, error) {
	key := packOffset{i, off}
	if c, ok := o.checked[key]; ok {
		return c, nil
	}
	if depth > maxDeltaDepth {
		return objectCost{}, fmt.Errorf("a chain of deltas deeper than %d", maxDeltaDepth)
	}
	p := o.packs[i]
	var buf [64]byte
	n, err := p.file.ReadAt(buf[:], off)
	if n == 0 {
		return objectCost{}, fmt.Errorf("reading a pack: %v", err)
	}
	b := buf[:n]
	c := b[0]
	typ, length, shift, at := plumbing.ObjectType((c>>4)&7), int64(c&0x0f), 4, 1
	for c&0x80 != 0 {
		if at >= len(b) || shift > 56 {
			return objectCost{}, errObjectDamaged
		}
		c = b[at]
		at++
		length |= int64(c&0x7f) << shift
		shift += 7
	}
	var baseOff int64
	var baseRef plumbing.Hash
	switch typ {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	case plumbing.OFSDeltaObject:
		if at >= len(b) {
			return objectCost{}, errObjectDamaged
		}
		c = b[at]
		at++
		rel := int64(c & 0x7f)
		for c&0x80 != 0 {
			if at >= len(b) || rel > 1<<48 {
				return objectCost{}, errObjectDamaged
			}
			c = b[at]
			at++
			rel = (rel+1)<<7 | int64(c&0x7f)
		}
		if baseOff = off - rel; rel <= 0 || baseOff < 12 {
			return objectCost{}, errObjectDamaged
		}
	case plumbing.REFDeltaObject:
		if at+20 > len(b) {
			return objectCost{}, errObjectDamaged
		}
		copy(baseRef[:], b[at:at+20])
		at += 20
	default:
		return objectCost{}, errObjectDamaged
	}
	zr, err := zlib.NewReader(io.NewSectionReader(p.file, off+int64(at), 1<<62))
	if err != nil {
		return objectCost{}, err
	}
	defer zr.Close()
	// A delta starts with its base's size and its target's.
	var head []byte
	if typ.IsDelta() {
		head = make([]byte, min(length, 20))
		if _, err := io.ReadFull(zr, head); err != nil {
			return objectCost{}, errObjectDamaged
		}
	}
	if verify {
		rest := length - int64(len(head))
		if n, err := io.CopyN(io.Discard, zr, rest+1); n != rest || !errors.Is(err, io.EOF) {
			return objectCost{}, errObjectDamaged
		}
	}
	if !typ.IsDelta() {
		return o.remember(key, objectCost{size: length, cost: length}, verify), nil
	}
	_, tail, ok := leb128(head)
	target, _, ok2 := leb128(tail)
	if !ok || !ok2 {
		return objectCost{}, errObjectDamaged
	}
	cost := objectCost{size: target}
	if !verify {
		return cost, nil
	}
	var base objectCost
	if typ == plumbing.OFSDeltaObject {
		base, err = o.packed(i, baseOff, depth+1, true)
	} else {
		base, err = o.object(baseRef, depth+1, true)
	}
	if err != nil {
		return objectCost{}, err
	}
	cost.cost = length + target + base.cost
	return o.remember(key, cost, true), nil
}

func (o *gitObjects) remember(key packOffset, c objectCost, verify bool) objectCost {
	if verify {
		o.checked[key] = c
	}
	return c
}

// leb128 decodes a size of a delta's header (little-endian base 128).
func leb128(b []byte) (int64, []byte, bool) {
	var v int64
	for i, c := range b {
		if i > 8 {
			break
		}
		v |= int64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, b[i+1:], true
		}
	}
	return 0, nil, false
}
