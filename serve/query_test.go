package serve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The query is strict: a value outside those listed, an unknown or
// repeated parameter, or a ?format that ?overlay contradicts is a 400
// naming the parameter, never a silently different answer.
func TestResponseFormatIsStrict(t *testing.T) {
	for _, c := range []struct {
		query, accept string
		want          string // the format, or the text the 400 must hold
		bad           bool
	}{
		{"", "", formatMask, false},
		{"", "application/json", formatJSON, false},
		{"format=mask", "application/json", formatMask, false},
		{"format=json", "", formatJSON, false},
		{"format=overlay", "", formatOverlay, false},
		{"overlay=1", "", formatOverlay, false},
		{"overlay=true", "application/json", formatOverlay, false},
		{"overlay=0", "", formatMask, false},
		{"overlay=false&format=json", "", formatJSON, false},
		{"format=overlay&overlay=1", "", formatOverlay, false},
		{"overlay=yes", "", "?overlay", true},
		{"overlay=2", "", "?overlay", true},
		{"overlay=TRUE", "", "?overlay", true},
		{"overlay=", "", "?overlay", true},
		{"format=", "", "?format", true},
		{"format=png", "", "mask, overlay or json", true},
		{"format=mask&overlay=1", "", "give one of them", true},
		{"format=json&overlay=1", "", "give one of them", true},
		{"format=overlay&overlay=0", "", "give one of them", true},
		{"format=mask&format=json", "", "?format is given 2 times", true},
		{"colour=red", "", `"colour"`, true},
		{"format=%zz", "", "malformed", true},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/segment?"+c.query, nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		f, herr := responseFormat(r)
		switch {
		case c.bad && (herr == nil || herr.status != http.StatusBadRequest || !strings.Contains(herr.msg, c.want)):
			t.Errorf("?%s: got %q, %v; want a 400 saying %q", c.query, f, herr, c.want)
		case !c.bad && (herr != nil || f != c.want):
			t.Errorf("?%s (Accept %q): got %q, %v; want %s", c.query, c.accept, f, herr, c.want)
		}
	}
}
