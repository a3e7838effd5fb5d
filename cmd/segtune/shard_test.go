package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// clearShardEnv makes the test independent of a job engine around it.
func clearShardEnv(t testing.TB) {
	for _, v := range []string{shard.EnvK8sIndex, shard.EnvSlurmID, shard.EnvSlurmCount, shard.EnvSlurmMin, shard.EnvSlurmStep} {
		t.Setenv(v, "")
	}
}

// writeRedImage writes a w×h PNG whose first red columns are red and the
// rest green (redModel labels red 1, green 0).
func writeRedImage(t *testing.T, path string, w, h, red int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.RGBA{10, 200, 10, 255}
			if x < red {
				c = color.RGBA{200, 10, 10, 255}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shardData writes n images (and masks that disagree with the model on a
// column or two, so scores are not all 1) of different sizes and object
// sizes.
func shardData(t *testing.T, dir string, n int) (imgs, masks string) {
	imgs, masks = filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	os.MkdirAll(imgs, 0o755)
	os.MkdirAll(masks, 0o755)
	for i := 0; i < n; i++ {
		w, h := 20+3*i, 12+i
		red := 1 + (i*7)%(w-2)
		name := fmt.Sprintf("frame%02d", i)
		ext := ".png"
		writeRedImage(t, filepath.Join(imgs, name+ext), w, h, red)
		labels := make([]uint8, w*h)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				switch {
				case x < red+i%3:
					labels[y*w+x] = 1
				case y == 0 && x == w-1:
					labels[y*w+x] = 255 // ignored
				}
			}
		}
		if err := imageio.WriteMaskPNG(filepath.Join(masks, name+".png"), labels, w, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	return imgs, masks
}

func segmentJSON(t testing.TB, args ...string) folder.Summary {
	t.Helper()
	out, err := runCLI(t, append([]string{"segment"}, append(args, "--json")...)...)
	if err != nil {
		t.Fatalf("segment %v: %v", args, err)
	}
	var s folder.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	return s
}

// folderBytes maps each file under dir (relative name) to its bytes.
func folderBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			m[rel], _ = os.ReadFile(p)
		}
		return nil
	})
	return m
}

func sameFolders(t *testing.T, want, got map[string][]byte, what string) {
	t.Helper()
	var wn, gn []string
	for k := range want {
		wn = append(wn, k)
	}
	for k := range got {
		gn = append(gn, k)
	}
	slices.Sort(wn)
	slices.Sort(gn)
	if !slices.Equal(wn, gn) {
		t.Fatalf("%s: files %v, want %v", what, gn, wn)
	}
	for k, v := range want {
		if !bytes.Equal(v, got[k]) {
			t.Errorf("%s: %s differs from the one-process run", what, k)
		}
	}
}

// Three shards write exactly the masks one process writes, each image
// once; a rerun keeps the outputs that check out and remakes a truncated
// one, one of the wrong size and a missing one; the index can come from a
// Kubernetes Indexed Job or a Slurm array instead of --shard.
func TestShardedSegmentMatchesOneProcessAndRestarts(t *testing.T) {
	runtimetest.Require(t)
	clearShardEnv(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in, _ := shardData(t, dir, 12)
	one, three := filepath.Join(dir, "one"), filepath.Join(dir, "three")
	if s := segmentJSON(t, "--model", model, "--input", in, "--output", one, "--overlay"); s.Succeeded != 12 || s.Skipped != 0 {
		t.Fatalf("one process: %+v", s)
	}
	done := 0
	owned := make([][]string, 3)
	for k := 0; k < 3; k++ {
		s := segmentJSON(t, "--model", model, "--input", in, "--output", three, "--overlay", "--shard", fmt.Sprintf("%d/3", k))
		if s.Shard != fmt.Sprintf("%d/3", k) || s.Failed != 0 || s.Skipped != 0 || s.Images != s.Succeeded {
			t.Errorf("shard %d: %+v", k, s)
		}
		done += s.Succeeded
		for i := 0; i < 12; i++ {
			if name := fmt.Sprintf("frame%02d.png", i); shard.Of(name, 3) == k {
				owned[k] = append(owned[k], name)
			}
		}
		if s.Images != len(owned[k]) {
			t.Errorf("shard %d segmented %d images, owns %d", k, s.Images, len(owned[k]))
		}
	}
	if done != 12 {
		t.Errorf("the shards segmented %d images in all, want 12", done)
	}
	want := folderBytes(t, one)
	sameFolders(t, want, folderBytes(t, three), "three shards")

	// The shard with the most images loses three outputs, as a killed
	// worker might leave them (and worse).
	k := 0
	for i := range owned {
		if len(owned[i]) > len(owned[k]) {
			k = i
		}
	}
	if len(owned[k]) < 4 {
		t.Fatalf("shard %d owns only %v", k, owned[k])
	}
	a, b, c := owned[k][0], owned[k][1], owned[k][2]
	os.WriteFile(filepath.Join(three, a), want[a][:len(want[a])/2], 0o644)
	small, _ := imageio.MaskImage(make([]uint8, 6), 3, 2, nil) // segment's own, of an image since replaced
	var sb bytes.Buffer
	id, _, _ := imageio.ReadPNGText(bytes.NewReader(want[b]), imageio.OutputModelKey)
	imageio.EncodeOutputPNG(&sb, small, id)
	os.WriteFile(filepath.Join(three, b), sb.Bytes(), 0o644)
	os.Remove(filepath.Join(three, "overlays", c))
	// A temporary file of another shard's output is another machine's
	// writer, as far as this one can tell: the shard leaves it alone (an
	// unsharded run, below, removes it). One of its own outputs' is what a
	// killed run of this shard left: the rerun removes it.
	if len(owned[(k+1)%3]) == 0 {
		t.Fatalf("shard %d owns nothing", (k+1)%3)
	}
	other := owned[(k+1)%3][0]
	foreignTmp := filepath.Join(three, "."+other+".tmp-999999999-1")
	os.WriteFile(foreignTmp, []byte("in flight"), 0o644)
	ownTmp := filepath.Join(three, "."+owned[k][3]+".tmp-999999999-1")
	os.WriteFile(ownTmp, []byte("left by a killed run of this shard"), 0o644)
	s := segmentJSON(t, "--model", model, "--input", in, "--output", three, "--overlay", "--shard", fmt.Sprintf("%d/3", k))
	if _, err := os.Stat(foreignTmp); err != nil {
		t.Errorf("a shard removed a temporary file it cannot know to be stale: %v", err)
	}
	if _, err := os.Stat(ownTmp); err == nil {
		t.Error("a shard's rerun left a temporary file of its own output")
	}
	os.Remove(foreignTmp)
	if s.Succeeded != 3 || s.Skipped != len(owned[k])-3 {
		t.Errorf("rerun of shard %d: %+v, want 3 remade and %d kept", k, s, len(owned[k])-3)
	}
	sameFolders(t, want, folderBytes(t, three), "after the rerun")

	// The same shard from the job engines' variables: all done already.
	t.Setenv(shard.EnvK8sIndex, fmt.Sprint(k))
	if s := segmentJSON(t, "--model", model, "--input", in, "--output", three, "--shards", "3"); s.Skipped != len(owned[k]) || s.Succeeded != 0 || s.Shard != fmt.Sprintf("%d/3", k) {
		t.Errorf("Kubernetes index %d: %+v", k, s)
	}
	t.Setenv(shard.EnvK8sIndex, "")
	t.Setenv(shard.EnvSlurmID, fmt.Sprint(10+k))
	t.Setenv(shard.EnvSlurmMin, "10")
	t.Setenv(shard.EnvSlurmCount, "3")
	if s := segmentJSON(t, "--model", model, "--input", in, "--output", three); s.Skipped != len(owned[k]) || s.Shard != fmt.Sprintf("%d/3", k) {
		t.Errorf("Slurm task %d: %+v", 10+k, s)
	}
	// --shard 0/1 overrides the environment (and, asked for, keeps outputs).
	if s := segmentJSON(t, "--model", model, "--input", in, "--output", three, "--shard", "0/1"); s.Images != 12 || s.Skipped != 12 {
		t.Errorf("--shard 0/1: %+v", s)
	}
	// Unsharded runs overwrite, as segment always did.
	clearShardEnv(t)
	os.WriteFile(foreignTmp, []byte("left by a killed run"), 0o644)
	if s := segmentJSON(t, "--model", model, "--input", in, "--output", three); s.Succeeded != 12 || s.Skipped != 0 {
		t.Errorf("unsharded rerun: %+v", s)
	}
	if _, err := os.Stat(foreignTmp); err == nil {
		t.Error("an unsharded run left a stale temporary file")
	}
}

// Bad --shard values, an index without a count, and unusable folders are
// errors that name the flag, before the model is even opened.
func TestShardAndLocationErrorsNameTheFlag(t *testing.T) {
	clearShardEnv(t)
	dir := t.TempDir()
	in, masks := shardData(t, dir, 1)
	model := filepath.Join(dir, "missing.onnx") // never reached
	out := filepath.Join(dir, "out")
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"segment", "--input", in, "--output", out, "--shard", "3/2"}, `--shard "3/2": the shard index must be from 0 to 1`},
		{nil, []string{"segment", "--input", in, "--output", out, "--shard", "1"}, `--shard "1" is not K/N`},
		{[]string{shard.EnvK8sIndex, "1"}, []string{"segment", "--input", in, "--output", out}, "--shards N"},
		{nil, []string{"segment", "--input", in, "--output", out, "--shards", "4"}, "without this worker's index"},
		{nil, []string{"segment", "--input", "ftp://host/images", "--output", out}, `--input ftp://host/images: unsupported URL scheme "ftp"`},
		{nil, []string{"segment", "--input", in, "--output", "s3:///x"}, "--output s3:///x: s3 URL without a bucket"},
		{nil, []string{"eval", "--images", "mem://x", "--masks", masks}, "--images mem://x: unsupported URL scheme"},
		{nil, []string{"eval", "--images", in, "--masks", masks, "--partial", "http://h/p.json"}, "--partial http://h/p.json: unsupported URL scheme"},
		{nil, []string{"eval", "--images", in, "--masks", masks, "--shard", "2/2"}, `--shard "2/2"`},
	}
	for _, c := range cases {
		clearShardEnv(t)
		for i := 0; i+1 < len(c.env); i += 2 {
			t.Setenv(c.env[i], c.env[i+1])
		}
		_, err := runCLI(t, append(c.args, "--model", model)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an output folder was made before the arguments were checked")
	}

	// No AWS credentials anywhere (and no metadata service): the error
	// names the flag and says where credentials come from. The endpoint is
	// a closed loopback port, so nothing leaves the machine.
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONFIG_FILE": filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "none")} {
		t.Setenv(k, v)
	}
	url := "s3://bucket/images?endpoint=http://127.0.0.1:1&use_path_style=true&region=us-east-1"
	_, err := runCLI(t, "segment", "--model", model, "--input", url, "--output", out)
	if err == nil || !strings.Contains(err.Error(), "--input s3://bucket/images") || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("no credentials: %v", err)
	}
}

var secondsRE = regexp.MustCompile(`"seconds": [0-9.e+-]+`)

// evalJSON runs eval (or eval merge) with --json and returns its output
// with the seconds (the one field that differs between runs) zeroed.
func evalJSON(t *testing.T, args ...string) string {
	t.Helper()
	at := 1 // eval's flags; merge's come before its files
	if len(args) > 1 && args[1] == "merge" {
		at = 2
	}
	out, err := runCLI(t, slices.Insert(slices.Clone(args), at, "--json")...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return secondsRE.ReplaceAllString(out, `"seconds": 0`)
}

// The merged report of three eval shards is byte for byte the report of
// one run (the seconds aside), with size groups split at the mean object
// size over every image and at a given threshold; merge refuses partial
// sets, duplicates and partials of another evaluation; a rerun shard finds
// its partial and stops; another shard's or a foreign file is not
// overwritten.
func TestShardedEvalMergeEqualsOneRun(t *testing.T) {
	runtimetest.Require(t)
	clearShardEnv(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	imgs, masks := shardData(t, dir, 14)
	for _, extra := range [][]string{{"--size-classes", "1"}, {"--size-classes", "1", "--size-threshold", "0.3"}, {}} {
		base := append([]string{"eval", "--model", model, "--images", imgs, "--masks", masks}, extra...)
		one := evalJSON(t, base...)
		if len(extra) > 0 && !strings.Contains(one, `"small"`) {
			t.Fatalf("no size groups in %s", one)
		}
		parts := make([]string, 3)
		for k := range parts {
			parts[k] = filepath.Join(dir, fmt.Sprintf("part%d-%d.json", len(extra), k))
			evalJSON(t, append(base, "--shard", fmt.Sprintf("%d/3", k), "--partial", parts[k])...)
		}
		merged := evalJSON(t, append([]string{"eval", "merge"}, parts[2], parts[0], parts[1])...)
		if merged != one {
			t.Errorf("%v: merged report\n%s\ndiffers from the one-run report\n%s", extra, merged, one)
		}
		// A one-shard partial merges into the same report too.
		whole := filepath.Join(dir, fmt.Sprintf("whole%d.json", len(extra)))
		evalJSON(t, append(base, "--partial", whole)...)
		if got := evalJSON(t, "eval", "merge", whole); got != one {
			t.Errorf("%v: merge of an unsharded partial differs:\n%s", extra, got)
		}
	}
	parts, _ := filepath.Glob(filepath.Join(dir, "part2-*.json"))
	for args, want := range map[string]string{
		parts[0] + " " + parts[1]: "shard(s) 2 of 3 missing",
		parts[0] + " " + parts[0]: "given twice",
		parts[0] + " " + filepath.Join(dir, "part0-1.json") + " " + parts[2]: "differ in size_classes",
	} {
		if _, err := runCLI(t, append([]string{"eval", "merge"}, strings.Fields(args)...)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("merge %s: %v, want %q", args, err, want)
		}
	}

	base := []string{"eval", "--model", model, "--images", imgs, "--masks", masks, "--size-classes", "1"}
	before, _ := os.ReadFile(parts[0])
	stat0, _ := os.Stat(parts[0])
	if got := evalJSON(t, append(base, "--shard", "0/3", "--partial", parts[0])...); !strings.Contains(got, `"mean_iou"`) {
		t.Errorf("rerun of a finished shard printed %s", got)
	}
	after, _ := os.ReadFile(parts[0])
	stat1, _ := os.Stat(parts[0])
	if !bytes.Equal(before, after) || !stat0.ModTime().Equal(stat1.ModTime()) {
		t.Error("a finished shard's partial was rewritten by its rerun")
	}
	if _, err := runCLI(t, append(base, "--shard", "1/3", "--partial", parts[0])...); err == nil || !strings.Contains(err.Error(), "holds shard 0/3") {
		t.Errorf("shard 1 on shard 0's file: %v", err)
	}
	foreign := filepath.Join(dir, "notes.json")
	os.WriteFile(foreign, []byte(`{"mine": true}`), 0o644)
	if _, err := runCLI(t, append(base, "--shard", "1/3", "--partial", foreign)...); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Errorf("foreign file: %v", err)
	}
	if b, _ := os.ReadFile(foreign); string(b) != `{"mine": true}` {
		t.Error("a foreign file was overwritten")
	}
	if _, err := runCLI(t, append(base[:len(base)-2], "--shard", "0/3", "--partial", parts[0])...); err == nil || !strings.Contains(err.Error(), "another evaluation") {
		t.Errorf("changed settings: %v", err)
	}
}

// eval merge checks each partial that eval --partial wrote: one edited as
// the hostile probes did (the matrix without its images' cells, a size
// fraction of 5, an image count without its record, an image moved to a
// shard its hash does not give it) is refused with its file named, and
// nothing is reported.
func TestEvalMergeRefusesEditedPartials(t *testing.T) {
	runtimetest.Require(t)
	clearShardEnv(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	imgs, masks := shardData(t, dir, 14)
	parts := make([]string, 3)
	for k := range parts {
		parts[k] = filepath.Join(dir, fmt.Sprintf("part-%d.json", k))
		evalJSON(t, "eval", "--model", model, "--images", imgs, "--masks", masks, "--size-classes", "1",
			"--shard", fmt.Sprintf("%d/3", k), "--partial", parts[k])
	}
	valid := evalJSON(t, append([]string{"eval", "merge"}, parts...)...)
	read := func(path string) *evaluate.Partial {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var p evaluate.Partial
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	write := func(path string, p *evaluate.Partial) {
		data, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		corrupt func(p0, p1 *evaluate.Partial)
		file    int // the partial refused
		want    string
	}{
		{"matrix edited without its cells", func(p0, _ *evaluate.Partial) { p0.Confusion[3] += 40 }, 0, "but its images' cells sum to"},
		{"fraction 5", func(p0, _ *evaluate.Partial) { p0.Records[0].Fraction = 5 }, 0, "fraction 5 outside [0,1]"},
		{"record dropped", func(p0, _ *evaluate.Partial) { p0.Records = p0.Records[1:] }, 0, "images, but"},
		{"image moved to another shard", func(p0, p1 *evaluate.Partial) {
			p1.Records = append(p1.Records, p0.Records[0])
			p1.Images++
			for _, c := range p0.Records[0].Cells {
				p1.Confusion[c[0]*2+c[1]] += c[2]
			}
		}, 1, "belongs to shard 0/3 by its name's hash"},
		{"seconds 1e308", func(p0, _ *evaluate.Partial) { p0.Seconds = 1e308 }, 0, "seconds 1e+308"},
		{"100000 class names", func(_, p1 *evaluate.Partial) { p1.Setup.ClassNames = make([]string, 100000) }, 1, "100000 class names for 2 classes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := slices.Clone(parts)
			for k := range edited[:2] {
				edited[k] = filepath.Join(t.TempDir(), filepath.Base(parts[k]))
			}
			p0, p1 := read(parts[0]), read(parts[1])
			tc.corrupt(p0, p1)
			write(edited[0], p0)
			write(edited[1], p1)
			out, err := runCLI(t, append([]string{"eval", "merge", "--json"}, edited...)...)
			if err == nil || !strings.Contains(err.Error(), edited[tc.file]+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("merge: %v, want %s refused with %q", err, edited[tc.file], tc.want)
			}
			if out != "" {
				t.Errorf("a report was printed: %s", out)
			}
		})
	}
	// A partial over evaluate.MaxPartialBytes is refused, named, unread (a
	// sparse file: it takes no memory or time to refuse).
	huge := filepath.Join(t.TempDir(), "huge.json")
	if f, err := os.Create(huge); err == nil {
		f.Truncate(4 << 30)
		f.Close()
	}
	if _, err := runCLI(t, "eval", "merge", "--json", parts[0], huge); err == nil || !strings.Contains(err.Error(), huge+" is larger than") {
		t.Errorf("merge of a 4 GiB partial: %v, want it refused by name", err)
	}
	if got := evalJSON(t, append([]string{"eval", "merge"}, parts...)...); got != valid {
		t.Error("the valid partials merge differently after the tests")
	}
}
