// Package reliability holds idemkit's fault, crash, bad-input, load and
// security tests. It has no API: everything is in its _test.go files, which
// run against DynamoDB Local (start them with scripts/with-dynamodb.sh; they
// skip without AWS_ENDPOINT_URL_DYNAMODB unless IDEMKIT_REQUIRE_DYNAMODB=1).
//
//   - faults_test.go: the store's faults, injected by an http.RoundTripper
//     (transport_test.go) in front of the real DynamoDB Local, which answers
//     chosen requests with throttling, 5xx, stalls or lost responses; the
//     SDK's retryer does the retrying. samples_test.go gives the sample
//     functions' own writes the same faults.
//   - crash_test.go: real processes (internal/crashee, the payments function
//     over DynamoDB Local) killed with SIGKILL or paused with SIGSTOP.
//   - skew_test.go: two invocations whose clocks disagree.
//   - oversize_test.go, badinput_test.go, corrupt_test.go: bad responses,
//     bad input and bad items in the table.
//   - stress_test.go: many workers, many duplicates, through the sample
//     functions (TestStress; `make stress` runs the large version).
//   - security_test.go: caller-scoped keys and what reaches the logs.
//
// FAILURE_MODES.md sums up, per fault, what the caller sees, what the table
// holds afterwards, whether the side effect can repeat, and which test shows it.
package reliability
