package imageio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxLabel is the largest label a LabelMap accepts, as source or target
// (16-bit masks).
const MaxLabel = 65535

// LabelMap remaps mask labels, e.g. to collapse a data set's classes onto a
// model's. The zero value (and the empty spec) maps every label to itself.
//
// Spec syntax, as written on the command line:
//
//	spec    = rule { ";" rule }            rules separated by semicolons
//	rule    = sources ":" target
//	sources = item { "," item } | "*"      labels, or "*" for every other label
//	item    = N | N "-" M                  one label or the inclusive range N..M
//	target  = N                            the new label
//	        | "+" N | "-" N                a shift: each source label l becomes l+N or l−N
//	        | "keep" | "error"             only after "*": see below
//
// N, M and targets are decimal integers 0..65535; blanks around tokens are
// ignored and a trailing ";" is allowed. Each label may be listed once, and
// a shift must keep every label it moves within 0..65535.
// Labels not listed go to the "*" target; without a "*" rule (or with
// "*:keep") they keep their value, and with "*:error" reading a mask that
// contains one fails. Example for CamVid person segmentation:
//
//	9,10:1;11:255;*:0     Pedestrian and Bicyclist → 1, Unlabelled → 255
//	                      (ignore), everything else → 0
//
// A spec may also be the name of a preset (see [LabelPresets]):
//
//	cityscapes   Cityscapes labelIds → the 19 trainIds, every other id → 255
//	ade20k       ADE20K's "reduce zero label": 0 → 255, 1..150 → 0..149,
//	             255 stays the ignore label, any other label is an error
//	voc          Pascal VOC: 0..20 kept, 255 (borders) stays the ignore label
//
// In JSON a LabelMap is either the spec string or an object whose keys are
// sources and values targets: {"9,10": 1, "11": 255, "*": 0}.
type LabelMap struct {
	to     map[int32]int32 // listed sources
	shifts []shift         // source ranges moved by a constant
	def    int32           // target of unlisted labels when mode is defaultValue
	mode   defaultMode
}

// shift maps every label in lo..hi to label+by.
type shift struct{ lo, hi, by int32 }

// LabelPresets are the label map specs that a preset name stands for.
// Cityscapes' table is cityscapesScripts' labels.py (id → trainId, with
// trainId 255 and −1 both the ignore label).
var LabelPresets = map[string]string{
	"cityscapes": "7:0;8:1;11:2;12:3;13:4;17:5;19:6;20:7;21:8;22:9;23:10;24:11;25:12;26:13;27:14;28:15;31:16;32:17;33:18;*:255",
	"ade20k":     "0:255;1-150:-1;255:255;*:error",
	"voc":        "0-20:+0;255:255;*:error",
}

type defaultMode uint8

const (
	defaultKeep defaultMode = iota
	defaultValue
	defaultError
)

// ParseLabelMap parses a label map spec (see [LabelMap]).
func ParseLabelMap(spec string) (*LabelMap, error) {
	if p, ok := LabelPresets[strings.ToLower(strings.TrimSpace(spec))]; ok {
		spec = p
	}
	m := &LabelMap{to: map[int32]int32{}}
	haveDefault := false
	rules := strings.Split(spec, ";")
	for i, rule := range rules {
		rule = strings.TrimSpace(rule)
		if rule == "" {
			if i == len(rules)-1 || strings.TrimSpace(spec) == "" {
				continue // trailing ";" or empty spec
			}
			return nil, fmt.Errorf("label map %q: empty rule %d", spec, i+1)
		}
		srcs, target, ok := strings.Cut(rule, ":")
		if !ok {
			return nil, fmt.Errorf("label map %q: rule %q needs sources:target", spec, rule)
		}
		srcs, target = strings.TrimSpace(srcs), strings.TrimSpace(target)
		if srcs == "*" {
			if haveDefault {
				return nil, fmt.Errorf("label map %q: more than one \"*\" rule", spec)
			}
			haveDefault = true
			switch target {
			case "keep":
				m.mode = defaultKeep
			case "error":
				m.mode = defaultError
			default:
				t, err := parseLabel(target)
				if err != nil {
					return nil, fmt.Errorf("label map %q: rule %q: target: %w", spec, rule, err)
				}
				m.mode, m.def = defaultValue, t
			}
			continue
		}
		by, isShift, err := parseShift(target)
		if err != nil {
			return nil, fmt.Errorf("label map %q: rule %q: target: %w", spec, rule, err)
		}
		var t int32
		if !isShift {
			if t, err = parseLabel(target); err != nil {
				return nil, fmt.Errorf("label map %q: rule %q: target: %w", spec, rule, err)
			}
		}
		for _, item := range strings.Split(srcs, ",") {
			lo, hi, err := parseRange(strings.TrimSpace(item))
			if err != nil {
				return nil, fmt.Errorf("label map %q: rule %q: %w", spec, rule, err)
			}
			for _, s := range m.shifts {
				if lo <= s.hi && s.lo <= hi {
					return nil, fmt.Errorf("label map %q: label %d is mapped twice", spec, max(lo, s.lo))
				}
			}
			if isShift {
				if lo+by < 0 || hi+by > MaxLabel {
					return nil, fmt.Errorf("label map %q: rule %q moves labels %d..%d outside 0..%d", spec, rule, lo, hi, MaxLabel)
				}
				for l := lo; l <= hi; l++ {
					if _, dup := m.to[l]; dup {
						return nil, fmt.Errorf("label map %q: label %d is mapped twice", spec, l)
					}
				}
				m.shifts = append(m.shifts, shift{lo, hi, by})
				continue
			}
			for l := lo; l <= hi; l++ {
				if _, dup := m.to[l]; dup {
					return nil, fmt.Errorf("label map %q: label %d is mapped twice", spec, l)
				}
				m.to[l] = t
			}
		}
	}
	return m, nil
}

// parseShift reads a "+N" or "-N" target; isShift is false for any other.
func parseShift(s string) (by int32, isShift bool, err error) {
	if s == "" || (s[0] != '+' && s[0] != '-') {
		return 0, false, nil
	}
	n, err := parseLabel(strings.TrimSpace(s[1:]))
	if err != nil {
		return 0, true, fmt.Errorf("shift %q: %w", s, err)
	}
	if s[0] == '-' {
		n = -n
	}
	return n, true, nil
}

func parseLabel(s string) (int32, error) {
	if s == "" {
		return 0, fmt.Errorf("missing label")
	}
	// ParseUint rejects signs, blanks and non-decimal forms.
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v > MaxLabel {
		return 0, fmt.Errorf("%q is not a label 0..%d", s, MaxLabel)
	}
	return int32(v), nil
}

func parseRange(s string) (lo, hi int32, err error) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err = parseLabel(strings.TrimSpace(a))
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	hi, err = parseLabel(strings.TrimSpace(b))
	if err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q runs backwards", s)
	}
	return lo, hi, nil
}

// Map returns the label that l maps to; ok is false when l is unlisted and
// the map says "*:error".
func (m *LabelMap) Map(l int32) (to int32, ok bool) {
	if m == nil {
		return l, true
	}
	if t, found := m.to[l]; found {
		return t, true
	}
	for _, s := range m.shifts {
		if l >= s.lo && l <= s.hi {
			return l + s.by, true
		}
	}
	switch m.mode {
	case defaultValue:
		return m.def, true
	case defaultError:
		return 0, false
	}
	return l, true
}

// IsIdentity reports whether m maps every label to itself.
func (m *LabelMap) IsIdentity() bool {
	if m == nil {
		return true
	}
	if m.mode == defaultError {
		return false
	}
	for _, s := range m.shifts {
		if s.by != 0 {
			return false
		}
	}
	for s, t := range m.to {
		if s != t {
			return false
		}
	}
	if m.mode == defaultKeep {
		return true
	}
	covered := len(m.to)
	for _, s := range m.shifts {
		covered += int(s.hi - s.lo + 1)
	}
	return covered == MaxLabel+1
}

// String returns the canonical spec: rules ordered by their first source,
// runs of consecutive sources written as ranges.
func (m *LabelMap) String() string {
	if m == nil {
		return ""
	}
	srcs := make([]int32, 0, len(m.to))
	for s := range m.to {
		srcs = append(srcs, s)
	}
	slices.Sort(srcs)
	byTarget := map[int32][]int32{}
	var order []int32
	for _, s := range srcs {
		t := m.to[s]
		if _, seen := byTarget[t]; !seen {
			order = append(order, t)
		}
		byTarget[t] = append(byTarget[t], s)
	}
	var b strings.Builder
	for _, t := range order {
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		ls := byTarget[t]
		for i := 0; i < len(ls); {
			j := i
			for j+1 < len(ls) && ls[j+1] == ls[j]+1 {
				j++
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(ls[i])))
			if j > i {
				b.WriteByte('-')
				b.WriteString(strconv.Itoa(int(ls[j])))
			}
			i = j + 1
		}
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(int(t)))
	}
	shifts := slices.Clone(m.shifts)
	slices.SortFunc(shifts, func(a, b shift) int { return int(a.lo - b.lo) })
	for _, s := range shifts {
		sep(&b)
		fmt.Fprintf(&b, "%d", s.lo)
		if s.hi > s.lo {
			fmt.Fprintf(&b, "-%d", s.hi)
		}
		fmt.Fprintf(&b, ":%+d", s.by)
	}
	switch m.mode {
	case defaultValue:
		sep(&b)
		b.WriteString("*:" + strconv.Itoa(int(m.def)))
	case defaultError:
		sep(&b)
		b.WriteString("*:error")
	}
	return b.String()
}

func sep(b *strings.Builder) {
	if b.Len() > 0 {
		b.WriteByte(';')
	}
}

// MarshalJSON writes the canonical spec string.
func (m LabelMap) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// UnmarshalJSON accepts a spec string or an object {"sources": target}.
func (m *LabelMap) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil {
			return fmt.Errorf("label map: %w", err)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys) // deterministic error messages
		rules := make([]string, 0, len(keys))
		for _, k := range keys {
			var target any
			if err := json.Unmarshal(obj[k], &target); err != nil {
				return fmt.Errorf("label map: key %q: %w", k, err)
			}
			var t string
			switch v := target.(type) {
			case float64:
				t = strconv.FormatFloat(v, 'f', -1, 64)
			case string:
				t = v
			default:
				return fmt.Errorf("label map: key %q: target must be a label, \"keep\" or \"error\"", k)
			}
			if strings.ContainsAny(k, ":;") || strings.ContainsAny(t, ":;") {
				return fmt.Errorf("label map: key %q: unexpected ':' or ';'", k)
			}
			rules = append(rules, k+":"+t)
		}
		p, err := ParseLabelMap(strings.Join(rules, ";"))
		if err != nil {
			return err
		}
		*m = *p
		return nil
	}
	var spec string
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("label map: want a spec string or an object: %w", err)
	}
	p, err := ParseLabelMap(spec)
	if err != nil {
		return err
	}
	*m = *p
	return nil
}
