package finetune

import (
	"fmt"
	"io"
	"strings"
)

// WriteSummary writes the end of a finished run for its user: the epoch
// table, the comparison with the base model, the best val mIoU and where
// the run's outputs are.
func (r *Result) WriteSummary(w io.Writer) error {
	if r.Table != nil {
		fmt.Fprintln(w)
		if _, err := r.Table.WriteTo(w); err != nil {
			return err
		}
	}
	if r.Base != nil {
		fmt.Fprintf(w, "\n%s\n", r.Base)
	}
	if r.BestMIoU != nil {
		fmt.Fprintf(w, "\nbest val mIoU %.4f; ", *r.BestMIoU)
	}
	_, err := fmt.Fprintf(w, "outputs in %s (%s)\n", r.Dir, strings.Join(RunOutputs(r.Dir), ", "))
	return err
}
