package setting

import "errors"

// Usage is err marked as its user's mistake, found before any work (a
// value refused, settings that do not go together, a data folder that
// cannot be read as one): a program exits for it with status 2, as for a
// flag that does not parse. ExitCode says so to a CLI (urfave/cli's
// ExitCoder), and err stays reachable (errors.As, errors.Is, Rename).
// Usage(nil) is nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
func (e *usageError) ExitCode() int { return 2 }

// ExitCode is the status a command-line program exits with for err: its
// own where it says (ExitCode, as a usage error's 2), 1 for another
// error, 0 for nil.
func ExitCode(err error) int {
	var exit interface{ ExitCode() int }
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return 1
}
