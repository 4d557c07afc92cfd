package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// AppendStep implements storage.Store with one script that, if the stored
// record is INPROGRESS and carries lease, appends step to its steps field
// (see encodeStep). The key's expiry stays the record's. A record that would
// exceed Options.MaxItemBytes with the step, measured as for Complete, is
// refused with an error wrapping storage.ErrTooLarge and left unchanged; a
// step that could not fit any record is refused before any call.
func (s *Store) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	key := s.Key(id)
	enc := encodeStep(step)
	// The smallest record with the step: the key and the steps field alone.
	if size := len(key) + len(fieldSteps) + len(enc); size > s.opts.MaxItemBytes {
		return fmt.Errorf("redisstore: append step %q: %w: the record would be more than %d bytes (limit %d)",
			step.Name, storage.ErrTooLarge, size, s.opts.MaxItemBytes)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: append step %q: %w", step.Name, err)
	}
	reply, err := appendStepScript.Run(ctx, s.client, []string{key}, lease, enc, itoa(int64(s.opts.MaxItemBytes))).Slice()
	if err != nil {
		return fmt.Errorf("redisstore: append step %q: %w", step.Name, err)
	}
	op := fmt.Sprintf("append step %q", step.Name)
	tag, rest := splitReply(reply)
	switch tag {
	case "ok":
		return nil
	case "toolarge":
		if size, ok := intAt(rest, 0); ok {
			return fmt.Errorf("redisstore: %s: %w: the record would be %d bytes (limit %d)", op, storage.ErrTooLarge, size, s.opts.MaxItemBytes)
		}
	case "gone", "lost", "done":
		return fencedError(op, tag, rest)
	case "wrongtype":
		return foreignKeyError(op, key, rest)
	}
	return unexpected(op, reply)
}

// Suspend implements storage.Store with one script that, if the stored
// record is INPROGRESS and carries lease, sets its lease end to leaseEnd
// (millisecond precision) and its suspended field, keeping its steps, every
// other field and the key's expiry. A record already gone is not an error.
func (s *Store) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: suspend: %w", err)
	}
	key := s.Key(id)
	reply, err := suspendScript.Run(ctx, s.client, []string{key}, lease, itoa(leaseEnd.UnixMilli())).Slice()
	if err != nil {
		return fmt.Errorf("redisstore: suspend: %w", err)
	}
	tag, rest := splitReply(reply)
	switch tag {
	case "ok", "gone":
		return nil
	case "lost":
		return fencedError("suspend", tag, rest)
	case "done":
		return givenBackError("suspend", rest)
	case "wrongtype":
		return foreignKeyError("suspend", key, rest)
	}
	return unexpected("suspend", reply)
}

// givenBackError reports the "done" reply of a release or suspend: the
// caller's record, no longer in progress. Completed, the caller's completion
// landed (storage.ErrAlreadyCompleted); in any other state it is not a
// running record of the caller's (storage.ErrLeaseLost).
func givenBackError(op string, rest []any) error {
	if strAt(rest, 0) == string(storage.StatusCompleted) {
		return fmt.Errorf("redisstore: %s: %w", op, storage.ErrAlreadyCompleted)
	}
	return fencedError(op, "done", rest)
}

// fencedError reports the replies of a write fenced by the lease and the
// INPROGRESS status that did not write: the record is gone ("gone"), has
// another lease ("lost", with its status) or is no longer in progress
// ("done", with its status). All wrap storage.ErrLeaseLost: the caller no
// longer owns a running record.
func fencedError(op, tag string, rest []any) error {
	status := strAt(rest, 0)
	switch {
	case tag == "gone":
		return fmt.Errorf("redisstore: %s: %w (the record is gone)", op, storage.ErrLeaseLost)
	case tag == "done":
		return fmt.Errorf("redisstore: %s: %w (the record is no longer in progress: status %q)", op, storage.ErrLeaseLost, status)
	case status != "":
		return fmt.Errorf("redisstore: %s: %w (the record is %s under another lease)", op, storage.ErrLeaseLost, status)
	}
	return fmt.Errorf("redisstore: %s: %w (the record has another lease)", op, storage.ErrLeaseLost)
}
