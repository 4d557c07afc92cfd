package receipts

import "github.com/idemkit/idemkit/functions/internal/boot"

// EnvIdempotencyTable names the idempotency records' table, the one
// environment variable the function reads at start-up: the payments come
// from the stream's images, so it reads no other table.
const EnvIdempotencyTable = "IDEMPOTENCY_TABLE"

// Config is the function's configuration.
type Config struct {
	// IdempotencyTable is the table of the idempotency records.
	IdempotencyTable string
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv), or
// returns an error naming every required variable that is unset.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	v, err := boot.Env(getenv, EnvIdempotencyTable)
	if err != nil {
		return Config{}, err
	}
	return Config{IdempotencyTable: v[0]}, nil
}
