package evaluate

// UsageError is a setting refused before any work, as a program's usage
// error: a command line exits with status 2 (ExitCode). Err names the
// setting by its key (a *setting.Error, a setting.Messagef message).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode is the status a program exits with: 2, a usage error.
func (e *UsageError) ExitCode() int { return 2 }

// Usage is err (nil for nil) as a *UsageError.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}
