package boot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
)

// LogLevelEnv is the variable Lambda's advanced logging controls set to the
// function's application log level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL).
const LogLevelEnv = "AWS_LAMBDA_LOG_LEVEL"

// Logging makes a JSON handler on w the default slog logger, at the level
// named by AWS_LAMBDA_LOG_LEVEL (INFO when unset or unknown). Lambda reads
// JSON lines on stdout as structured logs.
func Logging(w io.Writer, getenv func(string) string) *slog.Logger {
	l := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level(getenv(LogLevelEnv))}))
	slog.SetDefault(l)
	return l
}

func level(name string) slog.Level {
	switch strings.ToUpper(name) {
	case "TRACE", "DEBUG":
		return slog.LevelDebug
	case "WARN":
		return slog.LevelWarn
	case "ERROR", "FATAL":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// MissingEnvError names the required environment variables that are unset.
type MissingEnvError struct {
	// Names are the unset variables, in the order they were required.
	Names []string
}

// Error lists the missing variables.
func (e *MissingEnvError) Error() string {
	return "boot: missing required environment variable(s): " + strings.Join(e.Names, ", ")
}

// Env returns the values of the named environment variables, in order, or a
// *MissingEnvError naming every one that is unset or empty.
func Env(getenv func(string) string, names ...string) ([]string, error) {
	values := make([]string, len(names))
	var missing []string
	for i, n := range names {
		values[i] = getenv(n)
		if values[i] == "" {
			missing = append(missing, n)
		}
	}
	if missing != nil {
		return nil, &MissingEnvError{Names: missing}
	}
	return values, nil
}

// DynamoDB returns a client built from the SDK's default configuration
// chain: the function's role credentials and region on Lambda, and the
// endpoint of AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL when set
// (LocalStack, DynamoDB Local). Credentials are resolved lazily, at the first
// call, so this makes no network call. The SDK's own warnings go to the
// default slog logger, so every log line stays JSON.
func DynamoDB(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(sdkLogger{}))
	if err != nil {
		return nil, fmt.Errorf("boot: load AWS config: %w", err)
	}
	return dynamodb.NewFromConfig(cfg), nil
}

// sdkLogger forwards the SDK's log lines to slog.Default().
type sdkLogger struct{}

// Logf implements logging.Logger.
func (sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelWarn
	if c == logging.Debug {
		level = slog.LevelDebug
	}
	slog.Log(context.Background(), level, "aws-sdk: "+fmt.Sprintf(format, v...))
}

// Fatal logs err as the reason the function cannot start and exits with
// status 1; Lambda reports the init failure with this log line.
func Fatal(err error) {
	slog.Error("cannot start: "+err.Error(), slog.String("error", err.Error()))
	os.Exit(1)
}
