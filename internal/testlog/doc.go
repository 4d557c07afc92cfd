// Package testlog captures what a slog logger writes, for tests that check
// logs: Buffer collects the lines, safe for concurrent writes, and Logger
// writes JSON lines at every level from debug up.
package testlog
