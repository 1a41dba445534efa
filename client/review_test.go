package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// New never prints a secret of a base URL it refuses (user
// information, a token in the query).
func TestNewErrorHidesSecrets(t *testing.T) {
	for _, u := range []string{
		"http://user:s3cr3t-pw@127.0.0.1:7700/?x=1",
		"http://127.0.0.1:7700/?token=s3cr3t-tok",
		"ftp://user:s3cr3t-pw@host/",
	} {
		_, err := New(u, nil)
		if err == nil {
			t.Fatalf("%s accepted", u)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("New(%q): the error shows the secret: %v", u, err)
		}
	}
}

// An error answer whose body says another status than the HTTP status
// line: StatusCode reports the status line's.
func TestErrorStatusFromStatusLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"status":404,"title":"Not Found"}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(context.Background())
	if got := StatusCode(err); got != http.StatusForbidden {
		t.Errorf("StatusCode = %d for an HTTP 403 answer, want 403 (%v)", got, err)
	}
}
