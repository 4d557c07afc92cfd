package nethttp_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// The middleware on http.ServeMux routes (Go 1.22 patterns): POST requests
// need an Idempotency-Key, and a retry gets the first response again.
func ExampleMiddleware() {
	charges := 0
	createPayment := func(w http.ResponseWriter, r *http.Request) {
		charges++ // the side effect that must happen once
		// Pass idempotent.DownstreamKey(r.Context()) to the payment provider.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment":%d,"order":%q}`, charges, r.PathValue("order"))
	}

	idem := nethttp.Middleware(idempotent.New(idempotent.NewMemoryStore()))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{order}/payments", idem(http.HandlerFunc(createPayment)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(key string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders/7/payments", strings.NewReader(`{"amount":1000}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get(nethttp.HeaderReplayed) == "true")
	}
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`) // the client retries, say after a timeout
	post("")                                       // no key: refused
	fmt.Println("charges:", charges)

	// Output:
	// 201 {"payment":1,"order":"7"} replayed: false
	// 201 {"payment":1,"order":"7"} replayed: true
	// 400 {"type":"https://idemkit.dev/problems/missing-key","title":"Idempotency-Key header missing","status":400,"detail":"This operation requires an Idempotency-Key header; send a unique key, such as a UUID, and reuse it only to retry the same request."} replayed: false
	// charges: 1
}

// Keys scoped to the caller that an authentication middleware, run before
// this one, put in the request's context.
func ExampleWithScope() {
	type userKey struct{}
	idem := nethttp.Middleware(idempotent.New(idempotent.NewMemoryStore()), nethttp.WithScope(func(r *http.Request) (string, error) {
		user, ok := r.Context().Value(userKey{}).(string)
		if !ok {
			return "", errors.New("no authenticated user")
		}
		return user, nil
	}))
	_ = idem
}
