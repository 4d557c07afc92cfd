package batch

import (
	"fmt"
	"reflect"
)

// Settings are what the options of a source set; R is the source's raw
// record type. The options are plain values, the same for every handler
// type (a Go value cannot be assignable to Option[T] for every T), so the
// functions of the handler's value are kept as given and New checks their
// type against the handler's.
//
// The options' rules are documented once, on sqsbatch's options (and
// WithContinueOnFailure, which SQS has not, on kinesisbatch's); the other
// sources' docs link there and state only what is their own. The rules are
// tested here, once, on a fake source (engine_test.go).
//
// A nil function panics in its option; a function of another type than
// the handler's panics in New (the source's Wrap): both programmer errors,
// found at start-up.
type Settings[R any] struct {
	key, payload      typedFunc // of the handler's value; zero: not set
	recordKey         func(*R) (string, error)
	recordPayload     func(*R) (any, error)
	noPayload         bool
	parallelism       int
	continueOnFailure bool
}

// typedFunc is a function of the handler's value, given to the option
// named option: func(T) (string, error) for a key, func(T) (any, error)
// for a payload.
type typedFunc struct {
	option string
	fn     any
}

// Apply returns the Settings made by opts, in order.
func Apply[R any, O ~func(*Settings[R])](opts []O) Settings[R] {
	var s Settings[R]
	for _, opt := range opts {
		opt(&s)
	}
	return s
}

// WithKey is the WithKey option of package pkg.
func WithKey[R, T any](pkg string, key func(T) (string, error)) func(*Settings[R]) {
	MustFunc(key == nil, pkg, "WithKey")
	return func(s *Settings[R]) { s.key, s.recordKey = typedFunc{"WithKey", key}, nil }
}

// WithRecordKey is the WithRecordKey option of package pkg.
func WithRecordKey[R any](pkg string, key func(R) (string, error)) func(*Settings[R]) {
	MustFunc(key == nil, pkg, "WithRecordKey")
	return func(s *Settings[R]) {
		s.key, s.recordKey = typedFunc{}, func(r *R) (string, error) { return key(*r) }
	}
}

// WithPayloadValidation is the WithPayloadValidation option of package pkg.
func WithPayloadValidation[R, T any](pkg string, payload func(T) (any, error)) func(*Settings[R]) {
	MustFunc(payload == nil, pkg, "WithPayloadValidation")
	return func(s *Settings[R]) {
		s.payload, s.recordPayload, s.noPayload = typedFunc{"WithPayloadValidation", payload}, nil, false
	}
}

// WithRecordPayloadValidation is the WithRecordPayloadValidation option of
// package pkg.
func WithRecordPayloadValidation[R any](pkg string, payload func(R) (any, error)) func(*Settings[R]) {
	MustFunc(payload == nil, pkg, "WithRecordPayloadValidation")
	return func(s *Settings[R]) {
		s.payload, s.noPayload = typedFunc{}, false
		s.recordPayload = func(r *R) (any, error) { return payload(*r) }
	}
}

// WithoutPayloadValidation is the WithoutPayloadValidation option.
func WithoutPayloadValidation[R any]() func(*Settings[R]) {
	return func(s *Settings[R]) { s.payload, s.recordPayload, s.noPayload = typedFunc{}, nil, true }
}

// WithParallelism is the WithParallelism option.
func WithParallelism[R any](n int) func(*Settings[R]) {
	return func(s *Settings[R]) { s.parallelism = max(n, 1) }
}

// WithContinueOnFailure is the WithContinueOnFailure option.
func WithContinueOnFailure[R any]() func(*Settings[R]) {
	return func(s *Settings[R]) { s.continueOnFailure = true }
}

// Parallelism is how many lanes run at once (at least 1).
func (s *Settings[R]) Parallelism() int { return max(s.parallelism, 1) }

// parallelismSet is WithParallelism's n, or 0 when it was not given.
func (s *Settings[R]) parallelismSet() int { return s.parallelism }

// Continue reports WithContinueOnFailure: an ordered source goes on past a
// failed record instead of stopping its lane.
func (s *Settings[R]) Continue() bool { return s.continueOnFailure }

// keyFunc returns the key function s sets for handler type T, nil when it
// sets none.
func keyFunc[R, T any](s *Settings[R], pkg, wrap string) func(*R, T) (string, error) {
	switch {
	case s.key.fn != nil:
		f := typed[func(T) (string, error), T](s.key, pkg, wrap)
		return func(_ *R, v T) (string, error) { return f(v) }
	case s.recordKey != nil:
		f := s.recordKey
		return func(r *R, _ T) (string, error) { return f(r) }
	}
	return nil
}

// payloadFunc returns the payload function s sets for handler type T, nil
// when it sets none (the source's default applies, unless noPayload).
func payloadFunc[R, T any](s *Settings[R], pkg, wrap string) func(*R, T) (any, error) {
	switch {
	case s.payload.fn != nil:
		f := typed[func(T) (any, error), T](s.payload, pkg, wrap)
		return func(_ *R, v T) (any, error) { return f(v) }
	case s.recordPayload != nil:
		f := s.recordPayload
		return func(r *R, _ T) (any, error) { return f(r) }
	}
	return nil
}

// typed returns tf's function as F, a function of the handler's type T,
// and panics when it is a function of another type: the typed options are
// plain values, so the compiler cannot see the mismatch.
func typed[F any, T any](tf typedFunc, pkg, wrap string) F {
	f, ok := tf.fn.(F)
	if !ok {
		panic(fmt.Sprintf("%s: %s: the function given to %s takes %v, but the handler takes %v",
			pkg, wrap, tf.option, reflect.TypeOf(tf.fn).In(0), reflect.TypeFor[T]()))
	}
	return f
}

// MustFunc panics on a nil function given to an option: a programmer error,
// found at start-up. pkg names the package, option the option.
func MustFunc(isNil bool, pkg, option string) {
	if isNil {
		panic(pkg + ": " + option + ": nil function")
	}
}
