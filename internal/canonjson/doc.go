// Package canonjson turns JSON text into a canonical form, so that two documents
// that mean the same thing (key order, white space, escapes) hash the same, and
// two that differ (including numbers beyond 2^53) never do.
package canonjson
