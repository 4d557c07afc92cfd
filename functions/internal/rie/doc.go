// Package rie runs a sample function's bootstrap under AWS's Lambda Runtime
// Interface Emulator (aws-lambda-rie, the runtime inside AWS's base images),
// so the end-to-end tests meet a real Lambda runtime rather than one of ours:
// it starts the bootstrap on the first invocation, hands the handler its
// real deadline, enforces AWS_LAMBDA_FUNCTION_TIMEOUT (it kills the runtime
// with SIGKILL when the timeout passes, answers "Task timed out", and starts
// it again for the next invocation) and speaks Lambda's invoke API.
//
// make rie installs the pinned emulator into build/tools (`make test` does
// first); [Binary] finds it there, or at $IDEMKIT_RIE, and skips a test
// without it unless IDEMKIT_REQUIRE_RIE=1 (which `make test` sets). [Build]
// compiles a sample's main package for this machine; [Start] runs it under an
// emulator listening on free 127.0.0.1 ports (its invoke API and the Runtime
// API it gives the bootstrap; by default it would take 0.0.0.0:8080 and
// 127.0.0.1:9001) and stops both by PID when the test ends; a [Pool] is
// several of them, as Lambda runs concurrent invocations in as many
// execution environments (an emulator serves one invocation at a time).
//
// It runs on Linux only, as the emulator does: the bootstrap's process is
// found through /proc.
package rie
