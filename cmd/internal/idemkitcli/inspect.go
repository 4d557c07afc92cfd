package idemkitcli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// view is a record as the commands show it (and as --json prints it).
type view struct {
	ID     string `json:"id"`
	Store  string `json:"store"`
	Status string `json:"status,omitempty"`

	ExpiresAt string `json:"expiresAt,omitempty"`
	// Expired: the record no longer counts; TTL deletes it in time (DynamoDB's
	// lags up to days; on PostgreSQL, which has no TTL, the sweep does), and
	// every claim treats it as absent meanwhile.
	Expired bool `json:"expired"`
	// fate says what becomes of an expired record in this store (expiryWords).
	fate string

	LeaseExpiresAt string `json:"leaseExpiresAt,omitempty"`
	LeaseLapsed    bool   `json:"leaseLapsed"`
	Lease          string `json:"lease,omitempty"`
	// Suspended: the owner gave the record up after a handler error,
	// keeping its steps (storage.Record.Suspended); the next retry of the
	// same payload resumes it at once. Its lease end is in the past, but no
	// owner crashed or overran.
	Suspended bool `json:"suspended"`

	FingerprintPresent bool `json:"fingerprintPresent"`
	Version            int  `json:"version"`
	Foreign            bool `json:"foreign"`

	// Steps are the finished steps of an INPROGRESS record (idempotent.Step):
	// the next run for its payload resumes after them.
	Steps []stepView `json:"steps,omitempty"`

	ResponseBytes  int       `json:"responseBytes"`
	ResponseStored bool      `json:"responseStored"`
	Compressed     bool      `json:"compressed,omitempty"`
	Response       *response `json:"response,omitempty"`

	// Corrupt holds why the record cannot be read, and Raw its stored form.
	Corrupt string            `json:"corrupt,omitempty"`
	Raw     map[string]string `json:"raw,omitempty"`
}

// stepView is one finished step: its name, and its recorded result's size
// (and the result itself with --show-response).
type stepView struct {
	Name   string `json:"name"`
	Bytes  int    `json:"bytes"`
	Result string `json:"result,omitempty"`
}

// response is a decoded stored response: an HTTP front door's (status,
// headers, body), or the codec's bytes.
type response struct {
	HTTP       bool                `json:"http"`
	StatusCode int                 `json:"statusCode,omitempty"`
	Headers    map[string][]string `json:"headers,omitempty"`
	Cookies    []string            `json:"cookies,omitempty"`
	Body       string              `json:"body"`
	BodyBase64 bool                `json:"bodyBase64,omitempty"` // Body is base64: not valid UTF-8
	Error      string              `json:"error,omitempty"`
}

// httpForm is the JSON form in which the HTTP front doors store a response
// (idempotent/nethttp's storedResponse, a stored format: fields are only
// ever added). Decoded here rather than imported: that type is unexported
// in package nethttp.
type httpForm struct {
	StatusCode        *int                `json:"statusCode"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Cookies           []string            `json:"cookies"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded"`
}

func (c *Command) newView(r records, rec storage.Record, withResponse bool) view {
	now := c.now()
	v := view{
		ID: rec.ID, Store: r.name(), Status: string(rec.Status),
		ExpiresAt: rec.ExpiresAt.UTC().Format(time.RFC3339), Expired: rec.Expired(now),
		Lease: rec.Lease, Suspended: rec.Suspended, FingerprintPresent: rec.Fingerprint != "", Version: rec.Version,
		Foreign: rec.Version != storage.RecordVersion, ResponseBytes: len(rec.Data), fate: wordsOf(r).expiredFate(),
	}
	for _, st := range rec.Steps {
		sv := stepView{Name: st.Name, Bytes: len(st.Data)}
		if withResponse {
			sv.Result = string(st.Data)
		}
		v.Steps = append(v.Steps, sv)
	}
	if !rec.LeaseExpiresAt.IsZero() {
		v.LeaseExpiresAt = rec.LeaseExpiresAt.UTC().Format(time.RFC3339Nano)
		v.LeaseLapsed = rec.LeaseExpiresAt.UnixMilli() < now.UnixMilli()
	}
	if rec.Status == storage.StatusCompleted && len(rec.Data) > 0 {
		v.Compressed = rec.Data[0] == 'z'
		raw, stored, err := rec.Response()
		v.ResponseStored = stored
		switch {
		case err != nil:
			v.Corrupt = err.Error()
		case withResponse && stored:
			v.Response = decodeResponse(raw)
		}
	}
	return v
}

// decodeResponse reads codec bytes: an HTTP front door's stored form when
// they are one, else the bytes themselves.
func decodeResponse(raw []byte) *response {
	var f httpForm
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err == nil && f.StatusCode != nil {
		r := &response{HTTP: true, StatusCode: *f.StatusCode, Headers: map[string][]string{}, Cookies: f.Cookies}
		for k, v := range f.Headers {
			r.Headers[k] = []string{v}
		}
		for k, v := range f.MultiValueHeaders {
			r.Headers[k] = append(r.Headers[k], v...)
		}
		body := []byte(f.Body)
		if f.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(f.Body)
			if err != nil {
				r.Error = "the body is marked base64 but does not decode: " + err.Error()
			} else {
				body = b
			}
		}
		r.Body, r.BodyBase64 = bodyText(body)
		return r
	}
	r := &response{}
	r.Body, r.BodyBase64 = bodyText(raw)
	return r
}

func bodyText(b []byte) (string, bool) {
	if utf8.Valid(b) {
		return string(b), false
	}
	return base64.StdEncoding.EncodeToString(b), true
}

// print writes v for people.
func (v *view) print(w io.Writer, now time.Time) {
	fmt.Fprintf(w, "record   %s\n", v.ID)
	fmt.Fprintf(w, "store    %s\n", v.Store)
	if v.Corrupt != "" && v.Status == "" {
		fmt.Fprintf(w, "CORRUPT  %s\n", v.Corrupt)
		fmt.Fprintln(w, "stored   (as read; idemkit never changes such a record)")
		for _, k := range slices.Sorted(maps.Keys(v.Raw)) {
			fmt.Fprintf(w, "  %-24s %s\n", k, v.Raw[k])
		}
		return
	}
	fmt.Fprintf(w, "status   %s\n", v.Status)
	exp, _ := time.Parse(time.RFC3339, v.ExpiresAt)
	if v.Expired {
		fate := v.fate
		if fate == "" {
			fate = ttlWords{}.expiredFate()
		}
		fmt.Fprintf(w, "expiry   %s (%s ago): EXPIRED, no longer counts; %s\n", v.ExpiresAt, round(now.Sub(exp)), fate)
	} else {
		fmt.Fprintf(w, "expiry   %s (in %s): counts until then\n", v.ExpiresAt, round(exp.Sub(now)))
	}
	if v.LeaseExpiresAt != "" {
		end, _ := time.Parse(time.RFC3339Nano, v.LeaseExpiresAt)
		switch {
		case v.Suspended:
			fmt.Fprintf(w, "lease    ended %s (%s ago): SUSPENDED after a handler error, its steps kept (the next retry of the same payload resumes it at once)\n",
				v.LeaseExpiresAt, round(now.Sub(end)))
		case v.LeaseLapsed:
			fmt.Fprintf(w, "lease    ends %s: LAPSED %s ago (its owner crashed or overran; the next retry of the same payload takes it over)\n",
				v.LeaseExpiresAt, round(now.Sub(end)))
		default:
			fmt.Fprintf(w, "lease    ends %s (in %s): the owner may still be running\n", v.LeaseExpiresAt, round(end.Sub(now)))
		}
	}
	fmt.Fprintf(w, "payload  fingerprint %s\n", map[bool]string{true: "present (a retry must repeat the payload)", false: "absent"}[v.FingerprintPresent])
	if len(v.Steps) > 0 {
		fmt.Fprintf(w, "steps    %d finished (the next run for this payload resumes after them):\n", len(v.Steps))
		for i, st := range v.Steps {
			fmt.Fprintf(w, "         %d. %s (%d bytes)", i+1, st.Name, st.Bytes)
			if st.Result != "" {
				fmt.Fprintf(w, " %s", st.Result)
			}
			fmt.Fprintln(w)
		}
	}
	if v.Foreign {
		fmt.Fprintf(w, "version  %d: FOREIGN (this library writes %d): never replayed, answered as a corrupt record\n", v.Version, storage.RecordVersion)
	} else {
		fmt.Fprintf(w, "version  %d\n", v.Version)
	}
	switch {
	case v.Status != string(storage.StatusCompleted):
	case v.Corrupt != "":
		fmt.Fprintf(w, "response %d bytes: CORRUPT: %s\n", v.ResponseBytes, v.Corrupt)
	case !v.ResponseStored:
		fmt.Fprintln(w, "response not stored (too large or not serializable): duplicates get ErrResponseNotStored / 409 response-not-stored")
	default:
		fmt.Fprintf(w, "response %d bytes stored%s\n", v.ResponseBytes, map[bool]string{true: " (compressed)", false: ""}[v.Compressed])
	}
	if r := v.Response; r != nil {
		if r.HTTP {
			fmt.Fprintf(w, "  HTTP %d\n", r.StatusCode)
			for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
				for _, hv := range r.Headers[k] {
					fmt.Fprintf(w, "  %s: %s\n", k, hv)
				}
			}
			for _, ck := range r.Cookies {
				fmt.Fprintf(w, "  Set-Cookie: %s\n", ck)
			}
			fmt.Fprintln(w)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "  (%s)\n", r.Error)
		}
		if r.BodyBase64 {
			fmt.Fprintln(w, "  (binary, base64:)")
		}
		for _, line := range strings.Split(strings.TrimRight(r.Body, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// expiryWords say what becomes of an expired record, and why an id has no
// record. A store whose expired records are not deleted by TTL (DynamoDB's,
// Redis's key expiry: ttlWords, which a store without its own words gets)
// says it itself.
type expiryWords interface {
	expiredFate() string
	goneReasons() string
}

// ttlWords are a store's whose expired records TTL deletes.
type ttlWords struct{}

func (ttlWords) expiredFate() string {
	return "TTL would have removed it by now or will soon (DynamoDB's TTL lags up to days)"
}

func (ttlWords) goneReasons() string {
	return "never written, released after a failure, forgotten, or deleted by TTL"
}

// wordsOf returns r's expiryWords, or ttlWords.
func wordsOf(r records) expiryWords {
	if w, ok := r.(expiryWords); ok {
		return w
	}
	return ttlWords{}
}

func round(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// read gets a record and turns a corrupt one into a view of its raw form.
// err is a one-line store error, an ExitNotFound, or an ExitCorrupt whose
// view is filled in.
func (c *Command) read(ctx context.Context, r records, id string, withResponse bool) (view, storage.Record, error) {
	rec, err := r.Get(ctx, id)
	switch {
	case err == nil:
		v := c.newView(r, rec, withResponse)
		if v.Corrupt != "" || v.Foreign {
			return v, rec, &exitError{code: ExitCorrupt}
		}
		return v, rec, nil
	case errors.Is(err, storage.ErrNotFound):
		return view{}, rec, &exitError{code: ExitNotFound,
			err: fmt.Errorf("no record %s in %s (%s)", id, r.name(), wordsOf(r).goneReasons())}
	case isCorrupt(err):
		_, raw := rawOf(err)
		return view{ID: id, Store: r.name(), Corrupt: err.Error(), Raw: raw}, rec, &exitError{code: ExitCorrupt}
	}
	return view{}, rec, storeError(r, err)
}

func (c *Command) inspect(ctx context.Context, args []string) error {
	fs := c.newFlags("inspect", "inspect (--id ID | KEY FLAGS) "+storeUsage+" [--show-response] [--json]\n\n"+
		"Shows a record: status, lease end and whether it lapsed (or the record was suspended after a handler\n"+
		"error), expiry and whether TTL would have removed it (on PostgreSQL, which has no TTL: what the sweep\n"+
		"does), fingerprint, finished steps, format version and the stored response's size. Exit 3: no record;\n"+
		"4: corrupt or foreign.")
	var k keyFlags
	k.register(fs, true)
	var s storeFlags
	s.register(fs)
	var asJSON, showResponse bool
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.BoolVar(&showResponse, "show-response", false, "decode and show the stored response (decompressed; HTTP responses as status, headers and body)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	id, err := k.recordID()
	if err != nil {
		return err
	}
	r, err := c.open(ctx, &s)
	if err != nil {
		return err
	}
	defer func() { _ = r.close() }()
	v, _, err := c.read(ctx, r, id, showResponse)
	if v.ID == "" {
		return err
	}
	if asJSON {
		if jerr := writeJSON(c.Stdout, v); jerr != nil {
			return jerr
		}
	} else {
		v.print(c.Stdout, c.now())
	}
	if err != nil {
		fmt.Fprintf(c.Stderr, "idemkit: record %s is corrupt or foreign: shown as stored, never replayed by the library, not changed by idemkit\n", id)
	}
	return err
}

func (c *Command) forget(ctx context.Context, args []string) error {
	fs := c.newFlags("forget", "forget (--id ID | KEY FLAGS) "+storeUsage+" [--force] [--dry-run]\n\n"+
		"Deletes a record so its key runs again: the next request or message with it runs the handler.\n"+
		"The delete is conditioned on the record just read: a record that changed meanwhile is left alone (exit 5).\n"+
		"Refused unless --force (exit 5): a live INPROGRESS record (lease not lapsed), and a record holding\n"+
		"finished steps (the next run would do them again instead of resuming after them).\n"+
		"Never deletes a record it cannot read (corrupt, or another tool's, such as Powertools': exit 4).")
	var k keyFlags
	k.register(fs, true)
	var s storeFlags
	s.register(fs)
	var force, dryRun bool
	fs.BoolVar(&force, "force", false, "delete a live INPROGRESS record, or one holding finished steps, too: its owner may still be running, "+
		"and a retry would run the handler (and the steps) a second time")
	fs.BoolVar(&dryRun, "dry-run", false, "show what would be deleted and delete nothing")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	id, err := k.recordID()
	if err != nil {
		return err
	}
	r, err := c.open(ctx, &s)
	if err != nil {
		return err
	}
	defer func() { _ = r.close() }()
	v, rec, err := c.read(ctx, r, id, false)
	if err != nil {
		if v.ID != "" {
			v.print(c.Stdout, c.now())
			return &exitError{code: ExitCorrupt, err: fmt.Errorf("record %s is corrupt or foreign: not deleting a record idemkit cannot read "+
				"(it may belong to another tool); it stops counting at its expiry, or delete it by hand after reading it", id)}
		}
		return err
	}
	v.print(c.Stdout, c.now())
	live := rec.Status == storage.StatusInProgress && !v.LeaseLapsed && !v.Expired
	if live {
		if !force {
			return &exitError{code: ExitRefused, err: fmt.Errorf("record %s is INPROGRESS and its lease has not lapsed: its owner may still be running. "+
				"Wait for the lease end, or pass --force", id)}
		}
		fmt.Fprintf(c.Stderr, "idemkit: WARNING: forgetting a live INPROGRESS record: its owner may still be running, "+
			"and a retry now runs the handler a second time alongside it\n")
	}
	if len(rec.Steps) > 0 {
		names := make([]string, len(rec.Steps))
		for i, st := range rec.Steps {
			names[i] = st.Name
		}
		steps := fmt.Sprintf("%d finished step(s) (%s)", len(names), strings.Join(names, ", "))
		if !force {
			return &exitError{code: ExitRefused, err: fmt.Errorf("record %s holds %s: forgetting it throws them away, and the next run "+
				"does them again (their side effects too) instead of resuming after them. Check what they did, then pass --force", id, steps)}
		}
		fmt.Fprintf(c.Stderr, "idemkit: WARNING: throwing away %s: the next run does them again\n", steps)
	}
	if dryRun {
		fmt.Fprintf(c.Stdout, "dry run: would delete %s\n", id)
		return nil
	}
	if err := r.Delete(ctx, rec); err != nil {
		if errors.Is(err, storage.ErrChanged) {
			return &exitError{code: ExitRefused, err: fmt.Errorf("record %s changed since it was read (completed, taken over, claimed anew or gone): "+
				"nothing deleted; inspect it again", id)}
		}
		return storeError(r, err)
	}
	fmt.Fprintf(c.Stdout, "forgotten: %s (the next request with this key runs the handler)\n", id)
	return nil
}

func isCorrupt(err error) bool { return errors.Is(err, storage.ErrCorruptRecord) }
