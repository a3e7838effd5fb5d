package imageio

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseLabelMap(t *testing.T) {
	m, err := ParseLabelMap("9,10:1;11:255;*:0")
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[int32]int32{0: 0, 3: 0, 8: 0, 9: 1, 10: 1, 11: 255, 12: 0, 300: 0} {
		if got, ok := m.Map(in); !ok || got != want {
			t.Errorf("Map(%d) = %d,%v, want %d", in, got, ok, want)
		}
	}
	if got := m.String(); got != "9-10:1;11:255;*:0" {
		t.Errorf("String() = %q", got)
	}

	keep, err := ParseLabelMap(" 255 : 11 ; 0-2 : 7 ; ")
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[int32]int32{255: 11, 0: 7, 2: 7, 3: 3, 11: 11} {
		if got, _ := keep.Map(in); got != want {
			t.Errorf("keep: Map(%d) = %d, want %d", in, got, want)
		}
	}
	if got := keep.String(); got != "0-2:7;255:11" {
		t.Errorf("String() = %q", got)
	}

	strict, err := ParseLabelMap("0:0;1:1;5:1;*:error")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := strict.Map(2); ok {
		t.Error("*:error accepted an unlisted label")
	}
	if got := strict.String(); got != "0:0;1,5:1;*:error" {
		t.Errorf("String() = %q", got)
	}

	for _, spec := range []string{"", "  ", "*:keep", "3:3"} {
		m, err := ParseLabelMap(spec)
		if err != nil || !m.IsIdentity() {
			t.Errorf("%q: identity %v, err %v", spec, m.IsIdentity(), err)
		}
	}
	if (*LabelMap)(nil).String() != "" || !(*LabelMap)(nil).IsIdentity() {
		t.Error("nil LabelMap is not the identity")
	}
}

func TestParseLabelMapErrors(t *testing.T) {
	cases := map[string]string{
		"9":             "needs sources:target",
		"9:":            "missing label",
		":1":            "missing label",
		"9:x":           "not a label",
		"0:-1":          "outside 0..65535",
		"65535:+1":      "outside 0..65535",
		"9:+x":          "not a label",
		"1-5:-1;3:0":    "mapped twice",
		"3:0;1-5:-1":    "mapped twice",
		"1-5:-1;4-9:+1": "mapped twice",
		"a:1":           "not a label",
		"1,,2:3":        "missing label",
		"5-2:1":         "runs backwards",
		"1-:1":          "missing label",
		"9:1;9:2":       "mapped twice",
		"1-5:1;3:0":     "mapped twice",
		"*:0;*:1":       "more than one",
		"1:1;;2:2":      "empty rule",
		"70000:1":       "not a label",
		"1:70000":       "not a label",
		"1:keep":        "not a label",
		"*:maybe":       "not a label",
		"1:2:3":         "not a label",
		"+1:2":          "not a label",
		"0x10:1":        "not a label",
		"1 2:3":         "not a label",
		"99999999999:1": "not a label",
	}
	for spec, want := range cases {
		_, err := ParseLabelMap(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want error containing %q, got %v", spec, want, err)
		}
		if err != nil && !strings.Contains(err.Error(), spec) {
			t.Errorf("%q: error does not quote the spec: %v", spec, err)
		}
	}
}

func TestLabelMapJSON(t *testing.T) {
	type holder struct {
		M *LabelMap `json:"m"`
	}
	var h holder
	if err := json.Unmarshal([]byte(`{"m":"9,10:1;11:255;*:0"}`), &h); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.M.Map(10); got != 1 {
		t.Fatalf("string form: Map(10) = %d", got)
	}
	if err := json.Unmarshal([]byte(`{"m":{"9,10":1,"11":255,"*":0}}`), &h); err != nil {
		t.Fatal(err)
	}
	if h.M.String() != "9-10:1;11:255;*:0" {
		t.Fatalf("object form: %q", h.M.String())
	}
	if err := json.Unmarshal([]byte(`{"m":{"0-3":2,"*":"error"}}`), &h); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.M.Map(4); ok {
		t.Fatal(`object form with "*":"error" accepted 4`)
	}
	out, err := json.Marshal(holder{mustParseMap(t, "9,10:1;11:255;*:0")})
	if err != nil || string(out) != `{"m":"9-10:1;11:255;*:0"}` {
		t.Fatalf("marshal: %s %v", out, err)
	}
	for _, bad := range []string{`{"m":5}`, `{"m":{"9":true}}`, `{"m":{"9":1.5}}`, `{"m":"9"}`, `{"m":{"9:1":2}}`, `{"m":[1]}`} {
		if err := json.Unmarshal([]byte(bad), &h); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func mustParseMap(t testing.TB, spec string) *LabelMap {
	t.Helper()
	m, err := ParseLabelMap(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A shift moves a whole range: ADE20K's "reduce zero label" in one rule.
func TestLabelMapShift(t *testing.T) {
	m, err := ParseLabelMap("0:255; 1-150 : -1")
	if err != nil {
		t.Fatal(err)
	}
	for from, want := range map[int32]int32{0: 255, 1: 0, 2: 1, 150: 149, 151: 151} {
		if got, ok := m.Map(from); !ok || got != want {
			t.Errorf("Map(%d) = %d, %v; want %d", from, got, ok, want)
		}
	}
	if got := m.String(); got != "0:255;1-150:-1" {
		t.Errorf("String() = %q", got)
	}
	again, err := ParseLabelMap(m.String())
	if err != nil || again.String() != m.String() {
		t.Errorf("round trip: %v, %v", again, err)
	}
	up, err := ParseLabelMap("3:+2;*:error")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := up.Map(3); !ok || got != 5 {
		t.Errorf("3:+2 maps 3 to %d, %v", got, ok)
	}
	if _, ok := up.Map(4); ok {
		t.Error("*:error accepted 4")
	}
	if zero, _ := ParseLabelMap("0-20:+0"); !zero.IsIdentity() {
		t.Error("a shift by 0 is not the identity")
	}
	if m.IsIdentity() {
		t.Error("a shift by -1 is the identity")
	}
}

// The presets, checked against the tables they come from: cityscapesScripts'
// labels.py (id, name, trainId) rows, ADE20K's reduce_zero_label, VOC.
func TestLabelPresets(t *testing.T) {
	cs, err := ParseLabelMap("cityscapes")
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		id, trainID int32
		name        string
	}{
		{0, 255, "unlabeled"}, {1, 255, "ego vehicle"}, {6, 255, "ground"}, {7, 0, "road"}, {8, 1, "sidewalk"},
		{9, 255, "parking"}, {10, 255, "rail track"}, {11, 2, "building"}, {14, 255, "guard rail"},
		{17, 5, "pole"}, {18, 255, "polegroup"}, {19, 6, "traffic light"}, {23, 10, "sky"}, {24, 11, "person"},
		{29, 255, "caravan"}, {30, 255, "trailer"}, {31, 16, "train"}, {33, 18, "bicycle"},
	}
	for _, r := range rows {
		if got, ok := cs.Map(r.id); !ok || got != r.trainID {
			t.Errorf("cityscapes %s: id %d → %d, want trainId %d", r.name, r.id, got, r.trainID)
		}
	}
	trainIDs := map[int32]bool{}
	for id := int32(0); id < 256; id++ {
		if tr, _ := cs.Map(id); tr != 255 {
			trainIDs[tr] = true
		}
	}
	if len(trainIDs) != 19 {
		t.Errorf("cityscapes maps onto %d trainIds, want 19", len(trainIDs))
	}
	ade, err := ParseLabelMap("ADE20K")
	if err != nil {
		t.Fatal(err)
	}
	for from, want := range map[int32]int32{0: 255, 1: 0, 150: 149, 255: 255} {
		if got, ok := ade.Map(from); got != want || !ok {
			t.Errorf("ade20k: %d → %d, %v; want %d", from, got, ok, want)
		}
	}
	// ADE20K has 150 classes: label 151 is none of them, not a 151st.
	for _, from := range []int32{151, 254} {
		if got, ok := ade.Map(from); ok {
			t.Errorf("ade20k: %d → %d, want it refused", from, got)
		}
	}
	voc, err := ParseLabelMap("voc")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []int32{0, 15, 20, 255} {
		if got, ok := voc.Map(l); !ok || got != l {
			t.Errorf("voc: %d → %d, %v", l, got, ok)
		}
	}
	if _, ok := voc.Map(21); ok {
		t.Error("voc accepted label 21")
	}
}
