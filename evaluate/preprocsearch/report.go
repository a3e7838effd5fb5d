package preprocsearch

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/setting"
)

// TableHeader heads the table of TableRows.
var TableHeader = []string{"rank", "preprocessing", "mIoU", "note"}

// TableRows are the candidates best first: rank, name, mIoU ("-" when
// not scored) and a note (not scored, why; current; tie).
func (res *Result) TableRows() [][]string {
	rows := make([][]string, len(res.Scores))
	for i, s := range res.Scores {
		miou, note := "-", ""
		if s.Err != "" {
			note = "not scored: " + s.Err
		} else {
			miou = fmt.Sprintf("%.4f", s.MeanIoU)
		}
		var marks []string
		if s.Current {
			marks = append(marks, "current")
		}
		if s.Tie {
			marks = append(marks, "tie")
		}
		if len(marks) > 0 {
			note = strings.TrimSpace(strings.Join(marks, ", ") + " " + note)
		}
		rows[i] = []string{strconv.Itoa(i + 1), s.Name, miou, note}
	}
	return rows
}

// WriteVerdict writes, after the table, how many images were scored,
// which candidates tie with the best and the choice; name calls the
// settings it names (sample) what the user types.
func (res *Result) WriteVerdict(w io.Writer, name func(key string) string) {
	fmt.Fprintf(w, "\nscored on %d of %d labelled images", res.Images, res.Available)
	if res.Images < res.Available {
		fmt.Fprint(w, setting.Advice(" ({sample} N scores more)").Named(name))
	}
	fmt.Fprintln(w)
	if tied := res.Tied(); len(tied) > 0 {
		names := make([]string, len(tied))
		for i, s := range tied {
			names[i] = s.Name
		}
		fmt.Fprintf(w, "%d candidates tie within the noise of %d images (the best's lead is below what %d resamples of the images show): %s\n",
			len(tied), res.Images, res.Resamples, strings.Join(names, "; "))
	} else {
		fmt.Fprintf(w, "best: %s, ahead of every other beyond the noise of %d images\n", res.Scores[0].Name, res.Images)
	}
	chosen := res.Scores[res.Chosen]
	switch {
	case chosen.Current && res.Chosen > 0:
		fmt.Fprintf(w, "chosen: the current settings (%s, mIoU %.4f), which tie with the best: nothing here shows another to be better\n", chosen.Name, chosen.MeanIoU)
	case chosen.Current:
		fmt.Fprintf(w, "chosen: %s (mIoU %.4f), the current settings\n", chosen.Name, chosen.MeanIoU)
	default:
		fmt.Fprintf(w, "chosen: %s (mIoU %.4f)\n", chosen.Name, chosen.MeanIoU)
	}
}

// WriteText writes the candidates' table, best first, and the verdict
// (WriteVerdict, its settings called name(key)).
func (res *Result) WriteText(w io.Writer, name func(key string) string) {
	t := &history.Table{Header: TableHeader, Rows: res.TableRows()}
	t.WriteTo(w)
	res.WriteVerdict(w, name)
}
