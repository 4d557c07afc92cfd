// Package idemkitcli is the idemkit operator command (cmd/idemkit): finding,
// inspecting and safely clearing idempotency records, and checking a table
// before it is used. It lives here, not in package main, so that the demo
// (cmd/demo) can run it in process. It reads records only through the
// library's public API (the stores' Get, Delete and Scan, and
// storage.Record.Response for a stored response), as any operator's tool
// could. Its tests, beside it, run every command against DynamoDB Local (in
// each table layout), Redis and a Redis Cluster.
//
// [Command.Run] parses the arguments with the standard library's flag
// package and returns the process's exit status; every failure is one line
// on Stderr, never a stack trace. The exit statuses:
//
//	0  done (check: nothing to fix)
//	1  failed: the store could not be reached or answered an error (table missing, no credentials, ...)
//	2  usage: unknown command, bad or missing flags
//	3  no record under that id
//	4  the record is corrupt or foreign: shown, never changed
//	5  forget refused: a live INPROGRESS record, or one holding finished steps, without --force; or the record changed since it was read
//	6  check found something to fix (each problem is printed with its fix)
//
// The store methods it uses (Get, Delete, Scan on dynamostore.Store,
// redisstore.Store and pgstore.Store) never rewrite a record: a record is read, shown, or
// deleted on condition that it is still as read. On a Redis Cluster (a
// go-redis cluster client) Get and Delete run on the primary that holds the
// record's slot, and Scan visits every primary. A Command is not safe for
// concurrent use; create one per run. On PostgreSQL, which has no TTL,
// sweep deletes expired records (pgstore.Store.DeleteExpired), for a
// scheduled job.
package idemkitcli
