package reliability_test

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// randomText is n bytes of base64 of random bytes: valid UTF-8 that needs no
// JSON escaping, with 6 bits of entropy per byte (compression gains ~25%).
func randomText(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 1))
	raw := make([]byte, n*3/4+3)
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	return base64.StdEncoding.EncodeToString(raw)[:n]
}

// reportText is n bytes of JSON lines with a few random numbers each, like a
// report or a listing: it compresses about fivefold.
func reportText(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 2))
	var b strings.Builder
	b.Grow(n + 128)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"line":%d,"sku":"SKU-%05d","qty":%d,"status":"reserved","warehouse":"eu-west-1a"}`+"\n",
			i, r.IntN(100000), r.IntN(1000))
	}
	return b.String()[:n]
}

// storedData returns the response bytes held in a record's data attribute:
// the envelope's first byte says how ('p' plain, 'z' DEFLATE, 'n' none).
func storedData(t testing.TB, data []byte) (tag byte, raw []byte) {
	t.Helper()
	require.NotEmpty(t, data)
	switch data[0] {
	case 'p':
		return 'p', data[1:]
	case 'z':
		raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(data[1:])))
		require.NoError(t, err)
		return 'z', raw
	default:
		return data[0], nil
	}
}

// TestOversizedResponses sends responses of 100 KB to 10 MB, random and
// compressible, through dynamostore on DynamoDB Local. Whatever fits in an
// item (400 KB, measured on the whole item) is stored, compressed when that
// helps, and replayed byte for byte. Past the limit the original caller
// still gets its response, the record is COMPLETED without it (never left
// INPROGRESS), and a duplicate gets idempotent.ErrResponseNotStored without
// running the handler again.
func TestOversizedResponses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	store := dynamostore.New(e.client, e.tables.Idempotency)
	tests := []struct {
		name   string
		body   string
		stored bool
		tag    byte // of the stored data
	}{
		{"random 100KB", randomText(1, 100<<10), true, 'z'},
		{"random 350KB", randomText(2, 350<<10), true, 'z'},
		{"random 1MB", randomText(3, 1<<20), false, 'n'},
		{"random 10MB", randomText(4, 10<<20), false, 'n'},
		{"compressible 100KB", reportText(5, 100<<10), true, 'z'},
		{"compressible 350KB", reportText(6, 350<<10), true, 'z'},
		{"compressible 1MB", reportText(7, 1<<20), true, 'z'}, // 1 MB, stored only thanks to compression
		{"compressible 10MB", reportText(8, 10<<20), false, 'n'},
		{"small", "ok", true, 'p'},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			var seen outcomes
			logger, logs := newLogger()
			wrapped := idempotent.Wrap(idempotent.New(store, seen.hook(), idempotent.WithLogger(logger)), func(context.Context, charge) (string, error) {
				runs.Add(1)
				return tt.body, nil
			}, idempotent.WithKey(byID))
			in := charge{ID: newKey(t)}

			out, err := wrapped(ctxTimeout(t, 30*time.Second), in)
			require.NoError(t, err, "the original caller gets its response")
			require.True(t, out == tt.body, "the original response, unchanged")
			ev := seen.last(t)
			item := e.record(t, ev.RecordID)
			assert.Equal(t, string(storage.StatusCompleted), str(item, "status"), "never left INPROGRESS")
			data := bin(item, "data")
			assert.LessOrEqual(t, len(data), storage.DefaultMaxItemBytes)
			tag, raw := storedData(t, data)
			assert.Equal(t, string(tt.tag), string(tag), "stored data: %d bytes", len(data))

			again, err := wrapped(ctxTimeout(t, 30*time.Second), in)
			if tt.stored {
				assert.Equal(t, idempotent.OutcomeExecuted, ev.Outcome)
				require.NoError(t, err)
				require.True(t, again == tt.body, "replayed byte for byte")
				assert.Equal(t, fmt.Sprintf("%q", tt.body), string(raw), "the stored JSON")
			} else {
				assert.Equal(t, idempotent.OutcomeNotStored, ev.Outcome)
				assert.ErrorIs(t, ev.Err, storage.ErrTooLarge)
				require.Len(t, logs.find(t, map[string]any{"outcome": "not_stored", "level": "ERROR"}), 1)
				require.ErrorIs(t, err, idempotent.ErrResponseNotStored)
				assert.Empty(t, again)
				assert.Equal(t, idempotent.OutcomeResponseNotStored, seen.last(t).Outcome)
			}
			assert.Equal(t, int32(1), runs.Load(), "the handler ran once")
		})
	}
}

// TestOversizedHTTPResponse: through the API Gateway adapter, a response too
// large to store reaches its caller; a duplicate gets 409 response-not-stored
// (without Retry-After) and the handler does not run again.
func TestOversizedHTTPResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var runs atomic.Int32
	body := randomText(9, 1<<20)
	handler := apigateway.WrapV2(idempotent.New(dynamostore.New(e.client, e.tables.Idempotency)),
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: body}, nil
		})
	req := httpRequest(newKey(t), `{"report":"all"}`)

	first, err := handler(ctxTimeout(t, 30*time.Second), req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, first.StatusCode)
	require.True(t, first.Body == body)

	dup, err := handler(ctxTimeout(t, 30*time.Second), req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, dup.StatusCode)
	assert.Contains(t, dup.Body, nethttp.ProblemResponseNotStored)
	assert.Empty(t, dup.Headers["Retry-After"])
	assert.Equal(t, int32(1), runs.Load())
	assert.Empty(t, e.inProgress(t))
}
