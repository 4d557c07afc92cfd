package storage_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/storage"
)

func TestRecordResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		data   []byte
		want   string
		stored bool
		err    bool
	}{
		{name: "plain", data: []byte(`p{"ok":true}`), want: `{"ok":true}`, stored: true},
		{name: "completed without its response", data: []byte("n")},
		{name: "no data", data: nil, err: true},
		{name: "unknown encoding", data: []byte(`x{}`), err: true},
		{name: "broken deflate", data: []byte{'z', 0xff, 0xfe}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := storage.Record{Status: storage.StatusCompleted, Data: tt.data}
			got, stored, err := rec.Response()
			if tt.err {
				require.ErrorIs(t, err, storage.ErrCorruptRecord)
				assert.False(t, stored)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.stored, stored)
			assert.Equal(t, tt.want, string(got))
		})
	}
}
