package annot

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// peakHeap runs f and returns the most bytes of heap objects, live or
// not yet collected, seen above where it started: sampled every 200µs,
// with the collector running at every 10% of growth so that the heap
// follows what f keeps rather than what it has dropped.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	f()
	close(done)
	<-stopped
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	return max(peak.Load(), base) - base
}

// repeatTo repeats item (with a comma between) until the text between
// head and tail is about n bytes.
func repeatTo(head, item, tail string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(head)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(tail)
	return b.Bytes()
}

// lsHostileExports are Label Studio exports of about n bytes, each
// listing many of one thing: what a reader that materialises every list
// pays for many times over.
func lsHostileExports(n int) map[string]func() []byte {
	task := `{"id":1,"data":{"image":"a.png"},"annotations":[{"id":2,"result":[`
	brush := `{"id":"r","type":"brushlabels","original_width":2,"original_height":2,"value":{"format":"rle","brushlabels":["a"],"rle":[`
	rep := func(head, item, tail string) func() []byte {
		return func() []byte { return repeatTo(head, item, tail, n) }
	}
	return map[string]func() []byte{
		"tasks":       rep(`[`, `{"data":{"image":"a.png"}}`, `]`),
		"empty tasks": rep(`[`, `{}`, `]`),
		"annotations": rep(`[{"id":1,"data":{"image":"a.png"},"annotations":[`, `{"was_cancelled":true}`, `]}]`),
		"results":     rep(`[`+task, `{}`, `]}]}]`),
		"rle":         rep(`[`+task+brush, `0`, `]}}]}]}]`),
		"data keys":   rep(`[{"id":1,"data":{`, `"k":1`, `},"annotations":[]}]`),
		"labels":      rep(`[`+task+`{"id":"r","type":"brushlabels","original_width":2,"original_height":2,"value":{"format":"rle","brushlabels":[`, `"a"`, `]}}]}]}]`),
	}
}

// A Label Studio export costs memory in proportion to what the reader
// keeps, not to how many items it lists: each hostile export of 4 MB is
// read (or refused) with a heap of at most three times its size (the
// unlabelled tasks it lists cost that much), where a
// reader that decodes the whole list first needs many times it.
func TestReadLabelStudioMemoryBounded(t *testing.T) {
	dir := t.TempDir()
	const size = 4 << 20
	for name, export := range lsHostileExports(size) {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		doc := export()
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		n := len(doc)
		doc = nil
		var err error
		got := peakHeap(func() { _, err = ReadLabelStudio(path, LabelStudioOptions{}) })
		t.Logf("%s: heap peaked %d kB above its start for %d kB (err %.80v)", name, got>>10, n>>10, err)
		if limit := uint64(3*n) + 1<<20; got > limit {
			t.Errorf("%s: reading %d bytes took %d bytes of heap (over %d)", name, n, got, limit)
		}
	}
}

// allocated is how many bytes f allocates on Go's heap, garbage included.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// fuzzAllocLimit is what a reader may allocate for an input of n bytes,
// garbage included: a constant for its buffers, and per byte what a JSON
// token of two bytes costs to read. A reader that materialises lists
// sized by numbers in its input goes past it.
func fuzzAllocLimit(n int) uint64 { return 512<<10 + 128*uint64(n) }

// FuzzDecodeLabelStudio feeds arbitrary bytes to the Label Studio reader:
// it must refuse them or return samples whose masks have their declared
// size, never panic, and allocate in proportion to its input.
func FuzzDecodeLabelStudio(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("testdata", "labelstudio_export.json")); err == nil {
		f.Add(data)
	}
	for _, export := range lsHostileExports(256) {
		f.Add(export())
	}
	brushTask := func(w, h int, rle []byte) []byte {
		vals := make([]string, len(rle))
		for i, b := range rle {
			vals[i] = strconv.Itoa(int(b))
		}
		return fmt.Appendf(nil, `[{"id":1,"data":{"image":"a.png"},"annotations":[{"id":2,"result":[{"id":"r","type":"brushlabels","original_width":%d,"original_height":%d,"value":{"format":"rle","brushlabels":["a"],"rle":[%s]}}]}]}]`,
			w, h, strings.Join(vals, ","))
	}
	f.Add(brushTask(1, 1, []byte{0, 0, 0, 4, 63, 255, 252, 255, 255}))
	// A 1024×1024 layer drawn all over in a few bytes: reading it must
	// not paint it.
	f.Add(brushTask(1024, 1024, repeatBrushRLE(1024, 1024, 255)))
	f.Fuzz(func(t *testing.T, data []byte) {
		var set *Set
		var err error
		if got := allocated(func() { set, err = DecodeLabelStudio(data, "a.json", LabelStudioOptions{MaxPixels: 1 << 20}) }); got > fuzzAllocLimit(len(data)) {
			t.Fatalf("%d bytes of input allocated %d", len(data), got)
		}
		if err != nil {
			return
		}
		for _, s := range set.Samples {
			if s.Width*s.Height > 1<<16 {
				continue // painting is Mask's, and big masks slow the fuzzer down
			}
			if m, err := s.Mask(); err == nil && len(m) != s.Width*s.Height {
				t.Fatalf("mask of %d pixels for %dx%d", len(m), s.Width, s.Height)
			}
		}
	})
}

// repeatBrushRLE encodes a w×h brush layer of RGBA pixels all equal to v
// as @thi.ng/rle-pack does with runs of 16-bit lengths: a few bytes for
// any size.
func repeatBrushRLE(w, h int, v byte) []byte {
	var out []byte
	var acc uint64
	var bits int
	put := func(x uint64, n int) {
		for i := n - 1; i >= 0; i-- {
			acc = acc<<1 | x>>i&1
			if bits++; bits == 8 {
				out, acc, bits = append(out, byte(acc)), 0, 0
			}
		}
	}
	num := 4 * w * h
	put(uint64(num), 32)
	put(7, 5) // 8-bit words
	for range 4 {
		put(15, 4) // 16-bit run lengths
	}
	for left := num; left > 0; {
		n := min(left, 1<<16)
		put(1, 1)
		put(0, 2)
		put(uint64(n-1), 16)
		put(uint64(v), 8)
		left -= n
	}
	if bits > 0 {
		put(0, 8-bits)
	}
	return out
}

// cocoHostileFiles are COCO files of about n bytes listing many of one
// thing.
func cocoHostileFiles(n int) map[string]func() []byte {
	numbered := func(head, format, tail string) func() []byte {
		return func() []byte {
			var b bytes.Buffer
			b.WriteString(head)
			for i := 1; b.Len() < n; i++ {
				if i > 1 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, format, i)
			}
			b.WriteString(tail)
			return b.Bytes()
		}
	}
	image := `{"images":[{"id":1,"file_name":"a.jpg","width":4,"height":4}],`
	return map[string]func() []byte{
		"images":        numbered(`{"images":[`, `{"id":%d,"file_name":"a.jpg","width":1,"height":1}`, `],"annotations":[],"categories":[]}`),
		"unique images": numbered(`{"images":[`, `{"id":%[1]d,"file_name":"%[1]d.jpg","width":1,"height":1}`, `],"annotations":[],"categories":[]}`),
		"empty images":  func() []byte { return repeatTo(`{"images":[`, `{}`, `]}`, n) },
		"annotations":   func() []byte { return repeatTo(image+`"annotations":[`, `{}`, `]}`, n) },
		"polygons":      numbered(image+`"annotations":[`, `{"id":%d,"image_id":1,"category_id":1,"segmentation":[[],[],[],[],[],[],[],[],[],[],[],[],[],[],[],[0,0,4,0,4,4]]}`, `],"categories":[{"id":1,"name":"a"}]}`),
		"categories":    func() []byte { return repeatTo(`{"images":[],"annotations":[],"categories":[`, `{}`, `]}`, n) },
		"other": func() []byte {
			return repeatTo(`{"info":[`, `{}`, `],"images":[],"annotations":[],"categories":[]}`, n)
		},
		"images last": numbered(`{"annotations":[{"id":1,"image_id":1,"category_id":1,"segmentation":[[0,0,4,0,4,4]]}],"categories":[{"id":1,"name":"a"}],"images":[`, `{"id":%[1]d,"file_name":"%[1]d.jpg","width":4,"height":4}`, `]}`),
		"rle counts": func() []byte {
			return repeatTo(image+`"annotations":[{"id":1,"image_id":1,"category_id":1,"segmentation":{"size":[4,4],"counts":[`, `0`, `]}}]}`, n)
		},
	}
}

// A COCO file costs memory in proportion to the samples and shapes it
// yields, as TestReadLabelStudioMemoryBounded has it for Label Studio:
// at most five times its size for a file of 1×1 images (a sample, its
// paths and the indices by id and file name take about that), and far
// less for lists of what yields nothing. Reading the whole file first
// and decoding every list took 5 to 80 times.
func TestReadCOCOMemoryBounded(t *testing.T) {
	dir := t.TempDir()
	const size = 4 << 20
	for name, file := range cocoHostileFiles(size) {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		doc := file()
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		n := len(doc)
		doc = nil
		var err error
		got := peakHeap(func() { _, err = ReadCOCO(path, COCOOptions{}) })
		t.Logf("%s: heap peaked %d kB above its start for %d kB (err %.80v)", name, got>>10, n>>10, err)
		if limit := uint64(5*n) + 1<<20; got > limit {
			t.Errorf("%s: reading %d bytes took %d bytes of heap (over %d)", name, n, got, limit)
		}
	}
}

// FuzzDecodeCOCO feeds arbitrary bytes to the COCO reader: it must refuse
// them or return samples whose masks have their declared size, never
// panic, and allocate in proportion to its input.
func FuzzDecodeCOCO(f *testing.F) {
	for _, file := range cocoHostileFiles(256) {
		f.Add(file())
	}
	f.Add([]byte(`{"images":[{"id":1,"file_name":"a.jpg","width":1000,"height":1000}],"annotations":[{"id":1,"image_id":1,"category_id":1,"segmentation":{"size":[1000,1000],"counts":"0` + "`" + `0"}}],"categories":[{"id":1,"name":"a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var set *Set
		var err error
		if got := allocated(func() { set, err = DecodeCOCO(data, "a.json", COCOOptions{MaxPixels: 1 << 20}) }); got > fuzzAllocLimit(len(data)) {
			t.Fatalf("%d bytes of input allocated %d", len(data), got)
		}
		if err != nil {
			return
		}
		for _, s := range set.Samples {
			if s.Width*s.Height > 1<<16 {
				continue
			}
			if m, err := s.Mask(); err == nil && len(m) != s.Width*s.Height {
				t.Fatalf("mask of %d pixels for %dx%d", len(m), s.Width, s.Height)
			}
		}
	})
}

// FuzzParseCVATLabelmap feeds arbitrary bytes to the labelmap.txt parser:
// it must refuse them or return at most MaxClasses labels of distinct
// names and colours, allocating in proportion to its input.
func FuzzParseCVATLabelmap(f *testing.F) {
	f.Add([]byte("# label:color_rgb:parts:actions\nbackground:0,0,0::\ncar:250,50,83::\n"))
	f.Add([]byte("a:1,2,3" + strings.Repeat(":", 1000) + "\n"))
	f.Add([]byte("a:1,2,3" + strings.Repeat(",", 1000) + "\n"))
	var many strings.Builder
	for i := range 300 {
		fmt.Fprintf(&many, "l%d:%d,%d,0::\n", i, i%256, i/256)
	}
	f.Add([]byte(many.String()))
	f.Fuzz(func(t *testing.T, data []byte) {
		var labels []CVATLabel
		var err error
		if got := allocated(func() { labels, err = parseCVATLabelmap(data, "labelmap.txt") }); got > fuzzAllocLimit(len(data)) {
			t.Fatalf("%d bytes of input allocated %d", len(data), got)
		}
		if err != nil {
			return
		}
		if len(labels) == 0 || len(labels) > MaxClasses {
			t.Fatalf("%d labels", len(labels))
		}
	})
}
