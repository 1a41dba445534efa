// Package s3test runs an S3 protocol server in-process on 127.0.0.1
// (github.com/johannesboyne/gofakes3, backed by memory) for tests that need
// a real object store: the blob store, publish and replicas use it through
// gocloud's s3blob driver exactly as they would use AWS S3.
package s3test

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running S3 protocol server.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	backend  gofakes3.Backend
}

// Start starts a server on 127.0.0.1 that the test's cleanup stops, and sets
// the AWS environment (static test credentials, region us-east-1) for the
// test, so the s3blob driver needs nothing else.
func Start(t testing.TB) *Server {
	t.Helper()
	backend := s3mem.New()
	ts := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(ts.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "escurel-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "escurel-test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return &Server{Endpoint: ts.URL, backend: backend}
}

// Bucket creates the bucket name and returns the gocloud URL of prefix
// inside it: s3://name?endpoint=…&region=us-east-1&use_path_style=true
// (prefix, when not empty, is added as prefix=… and should end in "/").
// A test that fails to create the bucket stops.
func (s *Server) Bucket(t testing.TB, name, prefix string) string {
	t.Helper()
	if err := s.backend.CreateBucket(name); err != nil && !gofakes3.IsAlreadyExists(err) {
		t.Fatalf("s3test: create bucket %s: %v", name, err)
	}
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", "us-east-1")
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	return "s3://" + name + "?" + q.Encode()
}
