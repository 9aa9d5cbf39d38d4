package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// serveUntil serves srv on ln until ctx ends, then lets in-flight requests
// finish for at most drain: the HTTP actor of every long-running command.
// stopping, when set, is called once the server stops serving (a listener
// error or ctx), before the drain.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, drain time.Duration, stopping func()) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if stopping != nil {
			stopping()
		}
		return err
	case <-ctx.Done():
	}
	if stopping != nil {
		stopping()
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
