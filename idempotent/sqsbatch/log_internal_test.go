package sqsbatch

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
)

func TestMessageLogHandlerKeepsAttrsAndGroups(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := coreLogger(slog.New(slog.NewTextHandler(&buf, nil))).With("fn", "orders").WithGroup("g")
	ctx := context.WithValue(context.Background(), messageKey{}, &events.SQSMessage{MessageId: "m1"})
	log.InfoContext(ctx, "hello", "k", "v")
	log.InfoContext(context.Background(), "no message")
	out := buf.String()
	assert.Contains(t, out, `msg=hello fn=orders g.k=v g.message_id=m1`)
	assert.Contains(t, out, `msg="no message" fn=orders`+"\n")
}
