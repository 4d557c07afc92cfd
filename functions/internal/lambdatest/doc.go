// Package lambdatest runs a sample function's real main package in a child
// process (the test binary, as its package's main: RunMainIfChild, Start),
// for the checks the sample functions' main packages share: AssertFailsFast,
// a start-up without its configuration that must exit with status 1 after
// one JSON log line, and AssertJSONLines.
//
// Every invocation of a sample bootstrap is tested under AWS's Lambda
// Runtime Interface Emulator instead (package rie, functions/e2e's
// TestEmulator): the fake Runtime API this package had is gone, as the
// emulator does all it did, with the real deadline, timeout and invoke API.
// What the emulator cannot do stays here: a start-up failure seen on its
// own. Under the emulator the bootstrap starts only at the first invocation,
// its exit status is not reported (the invocation gets an init error, and
// the emulator starts it again for the next one), and its one log line is
// mixed with the emulator's.
package lambdatest
