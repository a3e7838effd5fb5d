package setting

import (
	"errors"
	"fmt"
	"strings"
)

// Namer is an error whose message names settings: Named writes it with
// each setting called name(key). A library's error about how to go on
// ("lower {batch}") implements it so that a program can call the settings
// what its users type, without editing the message.
type Namer interface {
	error
	Named(name func(key string) string) string
}

// Key names a setting by its key: a library's own messages.
func Key(key string) string { return key }

// Sprintf is fmt.Sprintf with each {key} of format, a setting's key in
// braces, written as name(key) first; the arguments are not searched, so a
// path holding braces stays as it is.
func Sprintf(name func(key string) string, format string, args ...any) string {
	return fmt.Sprintf(expand(format, escaped(name)), args...)
}

// expand is s with each {key} written as name(key).
func expand(s string, name func(key string) string) string {
	format := s
	var b strings.Builder
	for {
		i := strings.IndexByte(format, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(format[i:], '}')
		if j < 0 || !isKey(format[i+1:i+j]) {
			b.WriteString(format[:i+1])
			format = format[i+1:]
			continue
		}
		b.WriteString(format[:i])
		b.WriteString(name(format[i+1 : i+j]))
		format = format[i+j+1:]
	}
	b.WriteString(format)
	return b.String()
}

// isKey reports whether s reads as a setting's key: lower-case words
// joined by _ or . ("max_steps", "train.images").
func isKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '.' {
			return false
		}
	}
	return true
}

// Advice is a library's advice naming settings by {key}, e.g. "lower
// {batch} or {crop}"; an error carries it and names it with Named.
type Advice string

func (a Advice) String() string { return a.Named(Key) }

// Named is the advice with each setting called name(key).
func (a Advice) Named(name func(key string) string) string {
	return expand(string(a), name)
}

// Messagef is fmt.Errorf whose format names settings by {key}: its
// message names them by key, and Rename names them its caller's way. The
// arguments are not searched for keys; format wraps at most one error (%w).
func Messagef(format string, args ...any) error {
	return &message{format: format, args: args, err: fmt.Errorf(expand(format, escaped(Key)), args...)}
}

type message struct {
	format string
	args   []any
	err    error // the message by key, wrapping what format's %w wraps
}

func (e *message) Error() string { return e.err.Error() }
func (e *message) Unwrap() error { return errors.Unwrap(e.err) }

func (e *message) Named(name func(key string) string) string {
	return fmt.Errorf(expand(e.format, escaped(name)), e.args...).Error()
}

// escaped is name with its names' % written %% for a format.
func escaped(name func(key string) string) func(string) string {
	return func(key string) string { return strings.ReplaceAll(name(key), "%", "%%") }
}
