// Package doccheck keeps idemkit's documentation honest. It has no API: its
// tests, run by `make test` with every other test of the root module, fail
// when the documentation and the code drift apart.
//
//   - pkgdoc_test.go: every package of the repository has a package comment
//     (in doc.go), and every exported identifier of a non-main package (with
//     the exported fields and methods of exported types) has a doc comment,
//     as pkg.go.dev shows them.
//   - codeblocks_test.go: every fenced code block of README.md,
//     CONTRIBUTING.md and docs/*.md is compiled or checked. A ```go block
//     that is a complete file (it starts with a package clause) is written
//     to a package of a new module outside the repository and vetted; any other ```go
//     block must carry a marker line "// example: <file> <Func>" and its
//     lines must appear, in order, in that function of that _test.go file,
//     which `go test` compiles and (with an Output comment) runs; the
//     excerpt, its "..." lines dropped, must itself parse as Go (statements,
//     declarations or call arguments), so it never stops in the middle of
//     a call or a block. Each command of a ```sh block must be `make
//     <target>` with an existing target or an existing script of the
//     repository (named /path/to/idemkit/scripts/... when the block is
//     headed "# in your module": those blocks run in the new user's module
//     of compilePrograms, given AWS_ENDPOINT_URL_DYNAMODB); ```json blocks must
//     parse; ```logsinsights blocks may only name log attributes and
//     outcomes that exist. ```yaml blocks, and ```sh blocks that hold other
//     commands, must name the test that checks them in a first-line marker
//     "# checked-by: <test file>" (infra/docs_test.go checks those of
//     docs/provisioning.md against the CDK stack). ```text blocks are
//     output and are not checked. Relative links must point to existing
//     files and headings.
//   - checkout_test.go: the README's quick start and docs/getting-started.md
//     show one set of commands to use idemkit from a clone until it is on
//     the module proxy; the compiled programs above are vetted and tested
//     in a new module outside the repository after following them
//     literally (go mod edit -replace, go mod tidy, go install).
//   - tryit_test.go: docs/trying-it.md followed in a new module against
//     DynamoDB Local: the table, the sample event, the test run twice (the
//     second must really run: -count=1), and idemkit finding the record.
//   - infra_test.go: infra/README.md names every function `make build`
//     builds (the Makefile's FUNCTIONS), and runs the CDK app only after
//     building them.
//   - quickstart_test.go: the README's quick start and docs/getting-started.md
//     show one identical main.go, and getting-started names every Outcome.
//   - gomod_test.go: the go line of go.mod, and the pins that keep it there,
//     are the ones CONTRIBUTING.md documents.
package doccheck
