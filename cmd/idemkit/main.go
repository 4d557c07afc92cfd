package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/idemkit/idemkit/internal/idemkitcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := (&idemkitcli.Command{Stdout: os.Stdout, Stderr: os.Stderr}).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
