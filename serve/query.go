package serve

import (
	"net/http"
	"net/url"
	"strings"
)

// response formats of /v1/segment.
const (
	formatMask    = "mask"
	formatOverlay = "overlay"
	formatJSON    = "json"
)

// responseFormat reads the answer asked for: ?format, or ?overlay=1 for
// an overlay, else JSON where the Accept header asks for it, else the
// mask. The query is strict: an unknown or repeated parameter, a value
// outside those listed, or a ?format that ?overlay contradicts is a 400
// naming it, never a silently different answer.
func responseFormat(r *http.Request) (string, *httpError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", fail(http.StatusBadRequest, "the query %q is malformed: %v", r.URL.RawQuery, err)
	}
	for k, v := range q {
		if k != "format" && k != "overlay" {
			return "", fail(http.StatusBadRequest, "unknown query parameter %q (the parameters are format and overlay)", k)
		}
		if len(v) > 1 {
			return "", fail(http.StatusBadRequest, "?%s is given %d times; give it once", k, len(v))
		}
	}
	f, hasFormat := q.Get("format"), q.Has("format")
	switch f {
	case formatMask, formatOverlay, formatJSON:
	default:
		if hasFormat {
			return "", fail(http.StatusBadRequest, "unknown ?format=%q (mask, overlay or json)", f)
		}
	}
	if q.Has("overlay") {
		var overlay bool
		switch v := q.Get("overlay"); v {
		case "1", "true":
			overlay = true
		case "0", "false":
		default:
			return "", fail(http.StatusBadRequest, "unknown ?overlay=%q (1 or true for an overlay, 0 or false for none)", v)
		}
		switch {
		case overlay && hasFormat && f != formatOverlay:
			return "", fail(http.StatusBadRequest, "?overlay=1 asks for an overlay and ?format=%s for another answer; give one of them", f)
		case !overlay && f == formatOverlay:
			return "", fail(http.StatusBadRequest, "?overlay=0 contradicts ?format=overlay; give one of them")
		case overlay:
			f = formatOverlay
		}
	}
	if f == "" {
		f = formatMask
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			f = formatJSON
		}
	}
	return f, nil
}
