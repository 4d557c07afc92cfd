// Package lambdatest runs a sample function's real main package in a child
// process against a fake Lambda Runtime API, so tests exercise exactly what
// Lambda runs: start-up (environment, clients, logging), lambda.Start's
// invoke loop and the handler, with the deadline header Lambda sends.
//
// The fake serves one invocation at a time and is safe for concurrent use.
// Serve, AssertFailsFast and AssertJSONLines hold the checks the sample
// functions' main packages share.
package lambdatest
