// Package benchbody holds the 1 KB JSON payment request the in-process
// benchmarks of the HTTP front doors and of canonical JSON send, so that
// their figures are comparable (BENCHMARKS.md §4 and §9).
package benchbody
