package idempotent

import (
	"context"
	"log/slog"

	"github.com/idemkit/idemkit/idempotent/internal/frontdoor"
)

// The front doors of this module reach the Engine's plumbing through package
// frontdoor (its doc says why): here is their view of an Engine.
func init() {
	frontdoor.Register(func(engine any) frontdoor.Engine { return (*frontDoor)(engine.(*Engine)) })
}

// frontDoor is an Engine seen by the front doors: the same struct, with the
// methods of frontdoor.Engine, which users do not see.
type frontDoor Engine

var _ frontdoor.Engine = (*frontDoor)(nil)

func (d *frontDoor) Do(ctx context.Context, call frontdoor.Call, work func(context.Context) ([]byte, error)) (frontdoor.Result, error) {
	res, err := (*Engine)(d).do(ctx, &call, nil, funcs{work: work, acceptFn: call.Accept})
	return frontdoor.Result{Response: res.response, Ran: res.ran}, err
}

func (d *frontDoor) Reject(ctx context.Context, call frontdoor.Call, err error) error {
	return (*Engine)(d).reject(ctx, &call, err)
}

func (d *frontDoor) NotStored(reason error) error { return (*Engine)(d).notStored(reason) }

func (d *frontDoor) Logger() *slog.Logger { return (*Engine)(d).logger() }

func (d *frontDoor) Disabled() bool { return d.cfg.disabled }

func (d *frontDoor) Transactional() bool { return d.txs != nil }
