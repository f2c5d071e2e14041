package apiconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Event is one watch event; Object is left raw for the caller to decode.
type Event struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

type eventMeta struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Code int `json:"code"` // of a Status, in ERROR events
}

// errGone is a 410: the resource version to resume from is compacted away.
var errGone = errors.New("resource version too old (410 Gone)")

// Watch streams the events of a collection (path may carry a query, e.g. a
// fieldSelector) after resource version rv, from a list, until ctx ends.
// (A watch without a resource version needs etcd's watch-progress requests,
// which Debian's etcd does not serve.) When a stream ends it resumes
// from the last resource version seen; when that is too old it calls relist,
// which returns the version to go on from. `ready` is called once, when the
// first stream is established, so callers know events from then on are seen.
func (c *Conn) Watch(ctx context.Context, path, rv string, ready func(), handle func(Event), relist func() (string, error)) error {
	separator := "?"
	if strings.Contains(path, "?") {
		separator = "&"
	}
	for ctx.Err() == nil {
		query := "watch=1&allowWatchBookmarks=true&timeoutSeconds=3600&resourceVersion=" + url.QueryEscape(rv)
		last, err := c.watchOnce(ctx, path+separator+query, rv, ready, handle)
		ready = nil
		rv = last
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errGone):
			if rv, err = relist(); err != nil {
				return fmt.Errorf("relist after 410: %w", err)
			}
		case err != nil && !Transient(err):
			return err
		case err != nil:
			time.Sleep(100 * time.Millisecond) // API server restarting, say
		}
	}
	return nil
}

func (c *Conn) watchOnce(ctx context.Context, path, rv string, ready func(), handle func(Event)) (string, error) {
	response, err := c.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return rv, err
	}
	defer response.Body.Close()
	if response.StatusCode == http.StatusGone {
		return rv, errGone
	}
	if response.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(response.Body, 300))
		return rv, &StatusError{Method: http.MethodGet, Path: path, Code: response.StatusCode, Body: string(body)}
	}
	if ready != nil {
		ready()
	}
	decoder := json.NewDecoder(response.Body)
	for {
		var event Event
		if err := decoder.Decode(&event); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return rv, nil
			}
			return rv, err
		}
		var meta eventMeta
		if err := json.Unmarshal(event.Object, &meta); err != nil {
			return rv, err
		}
		if event.Type == "ERROR" {
			if meta.Code == http.StatusGone {
				return rv, errGone
			}
			return rv, &StatusError{Method: http.MethodGet, Path: path, Code: meta.Code, Body: string(event.Object)}
		}
		if meta.Metadata.ResourceVersion != "" {
			rv = meta.Metadata.ResourceVersion
		}
		if event.Type != "BOOKMARK" {
			handle(event)
		}
	}
}
