// Package texttest holds the engine's checks of text no store can hold (see
// Text in package storage), which the tests of every store run over it: a
// prefix that is not valid UTF-8 or holds a NUL byte is refused by
// idempotent.New, a step name that is not is refused with
// idempotent.ErrInvalidStep before the step's function runs, on every try,
// and multibyte prefixes and step names work. So no store can differ from
// another where the engine's answer is concerned; what a store itself must
// hold is storetest's. It is imported by tests only.
package texttest
