package batch

// Options are the per-record settings a source's Option functions set: R is
// the source's raw record type, T the handler's record type.
type Options[R, T any] struct {
	// Key derives a record's idempotency key; nil: the source's default.
	Key func(*R, T) (string, error)
	// Payload is what a duplicate must repeat; nil: the source's default,
	// unless NoPayload.
	Payload func(*R, T) (any, error)
	// NoPayload turns payload validation off.
	NoPayload bool
	// Parallelism is how many lanes run at once (values below 1 mean 1).
	Parallelism int
	// Continue makes an ordered source go on past a failed record instead of
	// stopping its lane (streams only).
	Continue bool
}

// Apply returns the Options set by opts, in order.
func Apply[R, T any, O ~func(*Options[R, T])](opts []O) Options[R, T] {
	o := Options[R, T]{Parallelism: 1}
	for _, opt := range opts {
		opt(&o)
	}
	o.Parallelism = max(o.Parallelism, 1)
	return o
}

// MustFunc panics on a nil function given to an option: a programmer error,
// found at start-up. pkg names the package, option the option.
func MustFunc(isNil bool, pkg, option string) {
	if isNil {
		panic(pkg + ": " + option + ": nil function")
	}
}
