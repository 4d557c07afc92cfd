package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/cmd/internal/idemkitcli"
)

func main() {
	// go-redis logs each failed dial on its own; the command reports the
	// error once, in one line.
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := (&idemkitcli.Command{Stdout: os.Stdout, Stderr: os.Stderr}).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// quiet is a go-redis logger that drops what it is given.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
