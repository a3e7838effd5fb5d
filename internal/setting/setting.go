// Package setting is how a library refuses a value of one of its settings:
// an *Error names the setting by its key (the name a config file and a
// run's config.json use, e.g. "lr"), so that a program can call it what
// its users type (a CLI: the flag) without editing the message, and the
// library's own message reads well on its own.
package setting

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a value a library refuses for its setting Setting (a key).
// Value is the value as the message shows it ("" when the message shows
// none: the rule says it), Err what is wrong with it. Needs, when set, is
// another setting the value needs and Err is nil: "overlap: needs tile".
type Error struct {
	Setting string
	Value   string
	Err     error
	Needs   string
}

func (e *Error) Error() string { return e.Named(Key) }

func (e *Error) Unwrap() error { return e.Err }

// Named is the message with each setting called name(key).
func (e *Error) Named(name func(key string) string) string {
	var b strings.Builder
	b.WriteString(name(e.Setting))
	if e.Value != "" {
		b.WriteString(" " + e.Value)
	}
	b.WriteString(": ")
	if e.Needs != "" {
		b.WriteString("needs " + name(e.Needs))
	} else if n, ok := e.Err.(Namer); ok { // what is wrong names settings too
		b.WriteString(n.Named(name))
	} else if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Errorf is an *Error of setting key with value shown as value and what is
// wrong written as fmt.Errorf writes format.
func Errorf(key, value, format string, args ...any) *Error {
	return &Error{Setting: key, Value: value, Err: fmt.Errorf(format, args...)}
}

// Rename is err with the message of the first Namer (an *Error, say) in
// its chain written by Named(name); the wrappers' own words around it are
// kept, and err stays reachable (errors.As, errors.Is). It is err itself
// when that changes nothing: no Namer in the chain, or one Rename named
// already.
func Rename(err error, name func(key string) string) error {
	var n Namer
	if !errors.As(err, &n) {
		return err
	}
	msg := rewrite(err, name)
	if msg == err.Error() {
		return err
	}
	return &renamed{err: err, msg: msg}
}

// rewrite is err's message with its Namer named by name: a wrapper's
// message holds its inner error's message once (fmt.Errorf's %w), so the
// words before and after it are the wrapper's own.
func rewrite(err error, name func(key string) string) string {
	switch e := err.(type) {
	case *renamed: // named already
		return e.msg
	case Namer:
		return e.Named(name)
	}
	inner := errors.Unwrap(err)
	if inner == nil {
		return err.Error()
	}
	msg, in := err.Error(), inner.Error()
	i := strings.LastIndex(msg, in)
	if i < 0 { // the wrapper words its inner error its own way
		return msg
	}
	return msg[:i] + rewrite(inner, name) + msg[i+len(in):]
}

type renamed struct {
	err error
	msg string
}

func (e *renamed) Error() string { return e.msg }
func (e *renamed) Unwrap() error { return e.err }
