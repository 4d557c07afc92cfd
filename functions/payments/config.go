package payments

import "github.com/idemkit/idemkit/functions/internal/boot"

// Environment variables the function reads at start-up.
const (
	// EnvIdempotencyTable names the idempotency records' table.
	EnvIdempotencyTable = "IDEMPOTENCY_TABLE"
	// EnvPaymentsTable names the payments ledger table.
	EnvPaymentsTable = "PAYMENTS_TABLE"
)

// Config is the function's configuration.
type Config struct {
	// IdempotencyTable is the table of the idempotency records.
	IdempotencyTable string
	// PaymentsTable is the payments ledger table.
	PaymentsTable string
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv), or
// returns an error naming every required variable that is unset.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	v, err := boot.Env(getenv, EnvIdempotencyTable, EnvPaymentsTable)
	if err != nil {
		return Config{}, err
	}
	return Config{IdempotencyTable: v[0], PaymentsTable: v[1]}, nil
}
