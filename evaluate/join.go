package evaluate

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/internal/storage"
)

// joinResult is what a pairing of two streamed folders found.
type joinResult struct {
	pairs                     int
	imagesAlone, masksAlone   []string // the first few, as paths
	nImagesAlone, nMasksAlone int
}

const joinShown = 5

func (r joinResult) err() error {
	if r.nImagesAlone == 0 && r.nMasksAlone == 0 {
		return nil
	}
	some := func(names []string, n int) string {
		s := strings.Join(names, ", ")
		if n > len(names) {
			s += fmt.Sprintf(", and %d more", n-len(names))
		}
		return s
	}
	var parts []string
	if r.nImagesAlone > 0 {
		parts = append(parts, fmt.Sprintf("%d image(s) without a mask: %s", r.nImagesAlone, some(r.imagesAlone, r.nImagesAlone)))
	}
	if r.nMasksAlone > 0 {
		parts = append(parts, fmt.Sprintf("%d mask(s) without an image: %s", r.nMasksAlone, some(r.masksAlone, r.nMasksAlone)))
	}
	return fmt.Errorf("data set pairing: %s", strings.Join(parts, "; "))
}

// joinFolders pairs the images of imgs with the masks of masks by stem,
// streaming both listings side by side (a merge in byte order) and
// holding only names whose partner may still come: a name with stem s
// waits while the other listing is among names beginning with "s.". pair
// is called for each pair (returning false stops); the result counts the
// unmatched. Two files with one stem in a folder are an error.
func joinFolders(ctx context.Context, imgs, masks *storage.Folder, pair func(img, mask string) bool) (joinResult, error) {
	var res joinResult
	a, b := newJoinSide(ctx, imgs, &res.nImagesAlone, &res.imagesAlone), newJoinSide(ctx, masks, &res.nMasksAlone, &res.masksAlone)
	defer a.stop()
	defer b.stop()
	if err := a.advance(); err != nil {
		return res, err
	}
	if err := b.advance(); err != nil {
		return res, err
	}
	for a.ok || b.ok {
		s, other := a, b
		if !a.ok || (b.ok && b.cur < a.cur) {
			s, other = b, a
		}
		name, st := s.cur, folder.Stem(s.cur)
		if err := s.advance(); err != nil {
			return res, err
		}
		if partner, found := other.pending[st]; found {
			delete(other.pending, st)
			res.pairs++
			img, mask := name, partner
			if s == b {
				img, mask = partner, name
			}
			if !pair(img, mask) {
				return res, nil
			}
		} else {
			s.pending[st] = name
		}
		a.evict(b)
		b.evict(a)
	}
	return res, nil
}

// joinSide is one listing of joinFolders: its current name and the names
// still waiting for a partner.
type joinSide struct {
	f       *storage.Folder
	next    func() (string, error, bool)
	stop    func()
	cur     string
	ok      bool
	pending map[string]string // stem → name
	win     folder.StemWindow
	// nAlone counts the names found without a partner, alone keeps the
	// first joinShown of them as paths.
	nAlone *int
	alone  *[]string
}

func newJoinSide(ctx context.Context, f *storage.Folder, nAlone *int, alone *[]string) *joinSide {
	next, stop := iter.Pull2(folder.ImageNames(ctx, f))
	return &joinSide{f: f, next: next, stop: stop, pending: map[string]string{}, nAlone: nAlone, alone: alone}
}

// advance moves to the listing's next name, refusing one whose stem the
// listing already had.
func (s *joinSide) advance() error {
	name, err, ok := s.next()
	if err != nil {
		return err
	}
	s.cur, s.ok = name, ok
	if ok {
		if prev, dup := s.win.Add(name); dup {
			return fmt.Errorf("data set: %s and %s share the name %q; pairing would be ambiguous", s.f.Path(prev), s.f.Path(name), folder.Stem(name))
		}
	}
	return nil
}

// evict declares unmatched the waiting names whose partner can no longer
// come from other.
func (s *joinSide) evict(other *joinSide) {
	for st, name := range s.pending {
		if !other.ok || !strings.HasPrefix(other.cur, st+".") {
			delete(s.pending, st)
			*s.nAlone++
			if len(*s.alone) < joinShown {
				*s.alone = append(*s.alone, s.f.Path(name))
			}
		}
	}
}
