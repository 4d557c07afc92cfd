package rie

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Pool is several emulators of one function, as Lambda runs concurrent
// invocations in as many execution environments: an invocation takes a free
// one, or waits for one.
type Pool struct {
	emulators []*Emulator
	free      chan *Emulator
}

// NewPool starts n emulators of cfg (Start); they stop when t ends.
func NewPool(t testing.TB, n int, cfg Config) *Pool {
	t.Helper()
	p := &Pool{free: make(chan *Emulator, n)}
	for range n {
		e := Start(t, cfg)
		p.emulators = append(p.emulators, e)
		p.free <- e
	}
	return p
}

// Invoke invokes event on a free emulator (Emulator.Invoke), waiting for one
// until ctx ends. It is safe for concurrent use.
func (p *Pool) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	var e *Emulator
	select {
	case e = <-p.free:
	case <-ctx.Done():
		return nil, fmt.Errorf("rie: no free emulator: %w", ctx.Err())
	}
	defer func() { p.free <- e }()
	return e.Invoke(ctx, event)
}

// FunctionOutput returns the runtimes' lines of every emulator of the pool.
func (p *Pool) FunctionOutput() []string {
	var out []string
	for _, e := range p.emulators {
		out = append(out, e.FunctionOutput()...)
	}
	return out
}

// Output returns the output of every emulator of the pool, one after another.
func (p *Pool) Output() string {
	var b strings.Builder
	for _, e := range p.emulators {
		fmt.Fprintf(&b, "--- emulator %s\n%s", e.Address(), e.Output())
	}
	return b.String()
}
