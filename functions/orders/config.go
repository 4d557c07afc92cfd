package orders

import "github.com/idemkit/idemkit/functions/internal/boot"

// Environment variables the function reads at start-up.
const (
	// EnvIdempotencyTable names the idempotency records' table.
	EnvIdempotencyTable = "IDEMPOTENCY_TABLE"
	// EnvInventoryTable names the inventory table.
	EnvInventoryTable = "INVENTORY_TABLE"
)

// Config is the function's configuration.
type Config struct {
	// IdempotencyTable is the table of the idempotency records.
	IdempotencyTable string
	// InventoryTable is the inventory table.
	InventoryTable string
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv), or
// returns an error naming every required variable that is unset.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	v, err := boot.Env(getenv, EnvIdempotencyTable, EnvInventoryTable)
	if err != nil {
		return Config{}, err
	}
	return Config{IdempotencyTable: v[0], InventoryTable: v[1]}, nil
}
