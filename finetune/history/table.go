package history

import (
	"bytes"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Table is a text table: a header row and body rows of cells. WriteTo
// prints it with columns padded to a common width: text columns
// left-aligned, columns of numbers right-aligned.
type Table struct {
	Header []string
	Rows   [][]string
}

// WriteTo writes the table to w: the header, a rule of dashes, and the
// rows, columns separated by two spaces and lines ending in "\n" without
// trailing spaces. A column is numeric when all its body cells are
// numbers, durations, percentages, "-" or empty. Rows shorter than the header are padded with empty
// cells; extra cells are kept, as columns without a header.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	ncol := len(t.Header)
	for _, r := range t.Rows {
		ncol = max(ncol, len(r))
	}
	if ncol == 0 {
		return 0, nil
	}
	width := make([]int, ncol)
	numeric := make([]bool, ncol)
	for c := range ncol {
		numeric[c] = true
	}
	measure := func(row []string, body bool) {
		for c, cell := range row {
			width[c] = max(width[c], utf8.RuneCountInString(cell))
			if body && cell != "" && cell != "-" && !isNumber(cell) {
				numeric[c] = false
			}
		}
	}
	measure(t.Header, false)
	for _, r := range t.Rows {
		measure(r, true)
	}
	var b bytes.Buffer
	line := func(row []string) {
		var l strings.Builder
		for c := range ncol {
			cell := ""
			if c < len(row) {
				cell = row[c]
			}
			if c > 0 {
				l.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[c]-utf8.RuneCountInString(cell))
			if numeric[c] {
				l.WriteString(pad + cell)
			} else {
				l.WriteString(cell + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	line(t.Header)
	rule := make([]string, ncol)
	for c := range rule {
		rule[c] = strings.Repeat("-", width[c])
	}
	line(rule)
	for _, r := range t.Rows {
		line(r)
	}
	n, err := w.Write(b.Bytes())
	return int64(n), err
}

// String returns the table as WriteTo prints it.
func (t *Table) String() string {
	var b strings.Builder
	t.WriteTo(&b)
	return b.String()
}

func isNumber(s string) bool {
	if _, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64); err == nil {
		return true
	}
	_, err := time.ParseDuration(s)
	return err == nil
}

// FormatNumber formats v for a table: whole numbers in full, others to
// four significant digits, and NaN and infinities by name.
func FormatNumber(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == math.Trunc(v) && math.Abs(v) < 1e9:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// EpochTable returns one row per epoch record, after the base model's row
// (epoch 0, no training loss) where the run validated it: epoch (numbered
// from 1, as the run's progress lines number them), step, loss, lr,
// seconds, images/s, then every extra field that any epoch has, the
// validation mIoU first and the rest by name. Missing values print as "-".
func EpochTable(recs []Record) *Table {
	var epochs []Record
	for _, r := range recs {
		if r.Kind == KindEpoch || r.Kind == KindBase {
			epochs = append(epochs, r)
		}
	}
	var extras []string
	seen := map[string]bool{}
	for _, r := range epochs {
		for k := range r.Extra {
			if !seen[k] {
				seen[k] = true
				extras = append(extras, k)
			}
		}
	}
	slices.SortFunc(extras, func(a, b string) int {
		// val_miou leads; then plain names before per-class ones.
		ka, kb := extraRank(a), extraRank(b)
		if ka != kb {
			return ka - kb
		}
		return strings.Compare(a, b)
	})
	t := &Table{Header: append([]string{"epoch", "step", "loss", "lr", "seconds", "images/s"}, extras...)}
	for _, r := range epochs {
		loss := FormatNumber(r.Loss)
		if r.Kind == KindBase {
			loss = "-" // the base model was not trained
		}
		row := []string{
			strconv.FormatInt(r.Epoch+1, 10), strconv.FormatInt(r.Step, 10),
			loss, optional(r.LR), optional(r.Seconds), optional(r.ImagesPerSec),
		}
		for _, k := range extras {
			if v, ok := r.Extra[k]; ok {
				row = append(row, FormatNumber(v))
			} else {
				row = append(row, "-")
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func extraRank(name string) int {
	switch {
	case name == "val_miou":
		return 0
	case strings.Contains(name, "_iou_"):
		return 2
	}
	return 1
}

func optional(v float64) string {
	if v == 0 {
		return "-"
	}
	return FormatNumber(v)
}
