package annot

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// jsonStream reads a JSON document token by token, so that a reader
// keeps only what it decides to: json.Decoder's buffer holds the tokens
// not yet read, never a whole list. Each method reads one value.
type jsonStream struct{ dec *json.Decoder }

// skip reads the rest of the value whose first token is t.
func (s jsonStream) skip(t json.Token) error {
	if d, ok := t.(json.Delim); !ok || d != '{' && d != '[' {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := s.dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// object reads an object, calling key for each of its keys; key must read
// the key's value. null is an object without keys.
func (s jsonStream) object(what string, key func(string) error) error {
	t, err := s.dec.Token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('{') {
		s.skip(t)
		return fmt.Errorf("%s is not an object", what)
	}
	for s.dec.More() {
		t, err := s.dec.Token()
		if err != nil {
			return err
		}
		if err := key(t.(string)); err != nil {
			return err
		}
	}
	_, err = s.dec.Token()
	return err
}

// list reads a list, calling elem for each element; elem must read it.
// null is an empty list.
func (s jsonStream) list(what string, elem func(i int) error) error {
	_, err := s.nullableList(what, elem)
	return err
}

// nullableList is list, reporting whether the value was a list rather
// than null.
func (s jsonStream) nullableList(what string, elem func(i int) error) (bool, error) {
	t, err := s.dec.Token()
	if err != nil || t == nil {
		return false, err
	}
	if t != json.Delim('[') {
		s.skip(t)
		return false, fmt.Errorf("%s is not a list", what)
	}
	for i := 0; s.dec.More(); i++ {
		if err := elem(i); err != nil {
			return true, err
		}
	}
	_, err = s.dec.Token()
	return true, err
}

// scalar reads a value that should be a string, number, bool or null; a
// list or object is read and reported as nil, false.
func (s jsonStream) scalar() (json.Token, bool, error) {
	t, err := s.dec.Token()
	if err != nil {
		return nil, false, err
	}
	if _, ok := t.(json.Delim); ok {
		return nil, false, s.skip(t)
	}
	return t, true, nil
}

// str reads a value, returning it when it is a string.
func (s jsonStream) str() (string, bool, error) {
	t, _, err := s.scalar()
	v, ok := t.(string)
	return v, ok, err
}

// int reads a value, returning it when it is an integer that fits an int.
func (s jsonStream) int() (int, bool, error) {
	t, _, err := s.scalar()
	n, ok := t.(json.Number)
	if !ok {
		return 0, false, err
	}
	v, perr := strconv.Atoi(n.String())
	return v, perr == nil, err
}

// number reads a value, returning it as text when it is a number or a
// string (ids are either).
func (s jsonStream) number() (string, error) {
	t, _, err := s.scalar()
	switch v := t.(type) {
	case json.Number:
		return v.String(), err
	case string:
		return v, err
	}
	return "", err
}
