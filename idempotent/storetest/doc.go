// Package storetest is a conformance suite for implementations of
// storage.Store, in the shape of testing/fstest: one call runs every case.
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, mystore.New(...))
//	}
//
// The suite depends only on the standard library and package storage. The
// cases of the optional capabilities storage.StepStore (steps and
// suspension), storage.TxStore (transactional completion),
// storage.ClaimManyStore (many claims in one call),
// storage.FinishManyStore (many completions or releases in one call) and
// storage.AdminStore (operators' reads, deletes and scans) run only on
// stores that implement them. A TxStore also runs RunTx, the cases with
// writes of its own kind, which it makes through a TxWrites; an AdminStore
// runs RunAdmin, with a function that writes a record it cannot read (a
// ClaimManyStore's claims of one are checked there too):
//
//	storetest.RunTx(t, store, myWrites{table: "storetest_writes"})
//	storetest.RunAdmin(t, store, func(ctx context.Context, id string) error { ... })
//
// Every case uses fresh random record IDs, so one store (or one table) can serve
// the whole suite and be shared with other tests. Times are passed explicitly,
// as the Store contract requires; no case sleeps. Expiry is exercised with a
// "now" far in the future, so a store with native TTL (DynamoDB) never deletes a
// record under a running case.
package storetest
