package sqsbatch

import (
	"context"
	"log/slog"
)

// messageLogHandler adds the ID of the SQS message being processed, taken from
// the context, to every record. It is how the core's records (which know the
// hashed record ID, not the message) can be matched with a batch item failure.
type messageLogHandler struct {
	inner slog.Handler // nil: slog.Default's handler at the time of the call
}

func (h messageLogHandler) handler() slog.Handler {
	if h.inner != nil {
		return h.inner
	}
	return slog.Default().Handler()
}

func (h messageLogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.handler().Enabled(ctx, level)
}

func (h messageLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if m := messageFrom(ctx); m != nil {
		r = r.Clone()
		r.AddAttrs(slog.String("message_id", m.MessageId))
	}
	return h.handler().Handle(ctx, r)
}

func (h messageLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return messageLogHandler{inner: h.handler().WithAttrs(attrs)}
}

func (h messageLogHandler) WithGroup(name string) slog.Handler {
	return messageLogHandler{inner: h.handler().WithGroup(name)}
}

// coreLogger is the logger handed to the engine.
func coreLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(messageLogHandler{})
	}
	return slog.New(messageLogHandler{inner: l.Handler()})
}
