#!/usr/bin/env bash
# Usage: scripts/fuzz.sh [PACKAGE...]
#
# Runs every Go fuzz target (func FuzzXxx(f *testing.F) in a _test.go file) of the root module's packages, or of
# the PACKAGEs given (go list patterns, default ./...), one after another, each for FUZZTIME (default 30s; any
# -fuzztime value: 30s, 2m, 1000x). The seed corpora in each package's testdata/fuzz/<FuzzName>/ run first, as
# they do under plain go test. A failing input is written to testdata/fuzz/<FuzzName>/ by go test: commit it
# with the fix, so that it becomes a regression test.
#
# Runs all targets even after a failure; exits 1 if any failed. FUZZ_FLAGS adds flags to each go test (for
# example FUZZ_FLAGS=-race, or -parallel=1 on a busy machine). Needs nothing but Go: no target uses DynamoDB.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

fuzztime=${FUZZTIME:-30s}
read -r -a extra <<<"${FUZZ_FLAGS:-}"
if [ "$#" -eq 0 ]; then
  set -- ./...
fi

targets=() # "dir name" pairs
while IFS= read -r dir; do
  [ -n "$dir" ] || continue
  while IFS= read -r name; do
    targets+=("$dir $name")
  done < <(cat "$dir"/*_test.go 2>/dev/null | sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' | sort -u)
done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' "$@")

if [ "${#targets[@]}" -eq 0 ]; then
  echo "fuzz: no fuzz targets found in $*" >&2
  exit 1
fi

failed=()
for t in "${targets[@]}"; do
  dir=${t% *}
  name=${t#* }
  pkg=./${dir#"$root"/}
  echo "fuzz: $pkg $name for $fuzztime" >&2
  if ! go test ${extra[@]+"${extra[@]}"} -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
    failed+=("$pkg $name")
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  printf 'fuzz: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets passed (${fuzztime} each)" >&2
