-- The table of idemkit's PostgreSQL store (package pgstore): one row per idempotency record.
--
-- Store.CreateTable runs this file with the store's table in place of idempotency_records (and
-- idempotency_records_expires_at named after it); to create the default table yourself:
--
--   psql "$POSTGRES_URL" -v ON_ERROR_STOP=1 -f idempotent/pgstore/schema.sql
--
-- Times are timestamptz, stored truncated as the stores' conditions compare them: expires_at to whole
-- seconds, lease_expires_at to milliseconds. Text columns hold valid UTF-8 without NUL (the store refuses
-- any other id or step name with an error). id uses the "C" collation: byte order, the fastest
-- comparisons, and ids of one prefix side by side in the primary key (idemkit list --prefix).
CREATE TABLE IF NOT EXISTS idempotency_records (
    id               text COLLATE "C" PRIMARY KEY,      -- <prefix>#<sha256 hex of the key>, at most 577 bytes
    status           text        NOT NULL,              -- INPROGRESS or COMPLETED (expired is derived, never stored)
    expires_at       timestamptz NOT NULL,              -- when the record stops counting; expired rows count as absent
    lease_expires_at timestamptz,                       -- when an INPROGRESS owner's lease lapses; NULL when completed
    lease            text        NOT NULL,              -- the owner's random token: fences completion, release, steps
    fingerprint      text        NOT NULL DEFAULT '',   -- hash of the validated payload; '' for none
    data             bytea,                             -- the encoded response of a completed record; NULL for none
    version          integer     NOT NULL,              -- the record format version (storage.RecordVersion)
    step_names       text[]      NOT NULL DEFAULT '{}', -- the finished steps of an INPROGRESS record, in order
    step_data        bytea[]     NOT NULL DEFAULT '{}', -- their encoded results, one per name
    suspended        boolean     NOT NULL DEFAULT false, -- its owner gave it up after a failure, keeping its steps
    trace            text                                -- the trace context of the call that completed it; NULL for none
);

-- trace came later: a table created before it gets the column here (nullable, so at once, rewriting nothing).
ALTER TABLE idempotency_records ADD COLUMN IF NOT EXISTS trace text;

-- Expired rows are deleted by Store.DeleteExpired (or `idemkit sweep`), oldest first, through this index.
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at ON idempotency_records (expires_at);
