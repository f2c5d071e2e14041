// Package apiconn is a minimal kube-apiserver client over net/http: bearer
// token, verified TLS, HTTP/2, and a count of the requests sent (the
// benchmark subtracts its own requests from the API server's totals).
package apiconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// TokenEnv holds the bearer token, so it never shows in a process listing.
const TokenEnv = "BENCH_KUBE_TOKEN"

// Conn talks to one API server. Safe for concurrent use.
type Conn struct {
	Server   string
	token    string
	client   *http.Client
	requests atomic.Int64
}

// New connects to server (https://host:port), trusting only the CA in caFile;
// the token comes from $BENCH_KUBE_TOKEN.
func New(server, caFile string) (*Conn, error) {
	token := os.Getenv(TokenEnv)
	if token == "" {
		return nil, fmt.Errorf("$%s is empty: set it to the API server's bearer token", TokenEnv)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		// A custom TLS config turns HTTP/2 off unless asked for; client-go uses it too.
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Conn{Server: server, token: token, client: &http.Client{Transport: transport}}, nil
}

// Requests is how many HTTP requests this Conn has sent so far.
func (c *Conn) Requests() int64 { return c.requests.Load() }

// Do sends one request; body may be nil. The caller closes the response body.
func (c *Conn) Do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	request, err := http.NewRequestWithContext(ctx, method, c.Server+path, reader)
	if err != nil {
		return nil, err
	}
	request.Header.Set("Authorization", "Bearer "+c.token)
	request.Header.Set("Accept", "application/json")
	if body != nil {
		request.Header.Set("Content-Type", "application/json")
	}
	c.requests.Add(1)
	return c.client.Do(request)
}

// StatusError is a response with a status code other than 2xx.
type StatusError struct {
	Method, Path string
	Code         int
	Body         string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Code, e.Body)
}

// Transient says whether a failed request is worth retrying: connection
// errors, 429 Too Many Requests and 5xx.
func Transient(err error) bool {
	var status *StatusError
	if errors.As(err, &status) {
		return status.Code == http.StatusTooManyRequests || status.Code >= 500
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// Call sends a request and reads the whole response: the body on 2xx, a
// *StatusError otherwise. Transient failures are retried up to `attempts`
// times with a doubling pause.
func (c *Conn) Call(ctx context.Context, method, path string, body []byte, attempts int) ([]byte, error) {
	pause := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		data, err := c.callOnce(ctx, method, path, body)
		if err == nil || !Transient(err) || attempt >= attempts {
			return data, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause *= 2
	}
}

func (c *Conn) callOnce(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	response, err := c.Do(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	data, err := io.ReadAll(response.Body)
	if err != nil {
		return nil, err
	}
	if response.StatusCode/100 != 2 {
		if len(data) > 300 {
			data = data[:300]
		}
		return nil, &StatusError{Method: method, Path: path, Code: response.StatusCode, Body: string(data)}
	}
	return data, nil
}
