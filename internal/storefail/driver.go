package storefail

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
)

// OpenDB is sql.Open(driverName, dsn) with every error classified: the
// driver's connector (or one calling its Open) wrapped by Connector.
func OpenDB(drv driver.Driver, dsn string, classify Classifier) (*sql.DB, error) {
	var c driver.Connector
	if dc, ok := drv.(driver.DriverContext); ok {
		var err error
		if c, err = dc.OpenConnector(dsn); err != nil {
			return nil, Wrap(err, classify)
		}
	} else {
		c = dsnConnector{drv: drv, dsn: dsn}
	}
	return sql.OpenDB(Connector(c, classify)), nil
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// Connector wraps c so that the errors of its connections that classify
// names a cause for are *Error. The sentinels database/sql relies on
// (driver.ErrSkip, driver.ErrBadConn, driver.ErrRemoveArgument, io.EOF at
// the end of rows) pass unchanged, so that retries on a fresh connection
// and the end of a result work as without the wrapper.
func Connector(c driver.Connector, classify Classifier) driver.Connector {
	return &connector{c: c, f: classify}
}

type connector struct {
	c driver.Connector
	f Classifier
}

func (c *connector) wrap(err error) error {
	if err == nil || err == io.EOF || errors.Is(err, driver.ErrSkip) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, driver.ErrRemoveArgument) {
		return err
	}
	return Wrap(err, c.f)
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.c.Connect(ctx)
	if err != nil {
		return nil, c.wrap(err)
	}
	return &conn{c: cn, w: c}, nil
}

func (c *connector) Driver() driver.Driver { return c.c.Driver() }

type conn struct {
	c driver.Conn
	w *connector
}

var (
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
	_ driver.RowsNextResultSet  = (*rows)(nil)
	_ driver.StmtExecContext    = (*stmt)(nil)
	_ driver.StmtQueryContext   = (*stmt)(nil)
	_ driver.NamedValueChecker  = (*stmt)(nil)
)

// Unwrap is the driver's connection (modernc.org/sqlite's Limit looks
// through wrappers this way).
func (c *conn) Unwrap() driver.Conn { return c.c }

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	s, err := c.c.Prepare(query)
	if err != nil {
		return nil, c.w.wrap(err)
	}
	return &stmt{s: s, w: c.w}, nil
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	pc, ok := c.c.(driver.ConnPrepareContext)
	if !ok {
		return c.Prepare(query)
	}
	s, err := pc.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.w.wrap(err)
	}
	return &stmt{s: s, w: c.w}, nil
}

func (c *conn) Close() error { return c.w.wrap(c.c.Close()) }

func (c *conn) Begin() (driver.Tx, error) { //nolint:staticcheck // driver.Conn requires it
	t, err := c.c.Begin() //nolint:staticcheck // the driver's own fallback
	if err != nil {
		return nil, c.w.wrap(err)
	}
	return &tx{t: t, w: c.w}, nil
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	bt, ok := c.c.(driver.ConnBeginTx)
	if !ok {
		return c.Begin()
	}
	t, err := bt.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.w.wrap(err)
	}
	return &tx{t: t, w: c.w}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.c.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := e.ExecContext(ctx, query, args)
	return r, c.w.wrap(err)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.c.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := q.QueryContext(ctx, query, args)
	if err != nil {
		return nil, c.w.wrap(err)
	}
	return &rows{r: r, w: c.w}, nil
}

func (c *conn) Ping(ctx context.Context) error {
	if p, ok := c.c.(driver.Pinger); ok {
		return c.w.wrap(p.Ping(ctx))
	}
	return nil
}

func (c *conn) ResetSession(ctx context.Context) error {
	if r, ok := c.c.(driver.SessionResetter); ok {
		return c.w.wrap(r.ResetSession(ctx))
	}
	return nil
}

func (c *conn) IsValid() bool {
	if v, ok := c.c.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.c.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type tx struct {
	t driver.Tx
	w *connector
}

func (t *tx) Commit() error   { return t.w.wrap(t.t.Commit()) }
func (t *tx) Rollback() error { return t.w.wrap(t.t.Rollback()) }

type stmt struct {
	s driver.Stmt
	w *connector
}

func (s *stmt) Close() error  { return s.w.wrap(s.s.Close()) }
func (s *stmt) NumInput() int { return s.s.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) { //nolint:staticcheck // driver.Stmt requires it
	r, err := s.s.Exec(args) //nolint:staticcheck // the driver's own fallback
	return r, s.w.wrap(err)
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) { //nolint:staticcheck // driver.Stmt requires it
	r, err := s.s.Query(args) //nolint:staticcheck // the driver's own fallback
	if err != nil {
		return nil, s.w.wrap(err)
	}
	return &rows{r: r, w: s.w}, nil
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.s.(driver.StmtExecContext)
	if !ok {
		vs, err := values(args)
		if err != nil {
			return nil, err
		}
		return s.Exec(vs)
	}
	r, err := e.ExecContext(ctx, args)
	return r, s.w.wrap(err)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.s.(driver.StmtQueryContext)
	if !ok {
		vs, err := values(args)
		if err != nil {
			return nil, err
		}
		return s.Query(vs)
	}
	r, err := q.QueryContext(ctx, args)
	if err != nil {
		return nil, s.w.wrap(err)
	}
	return &rows{r: r, w: s.w}, nil
}

func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.s.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func values(args []driver.NamedValue) ([]driver.Value, error) {
	vs := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, errors.New("storefail: the driver does not support named parameters")
		}
		vs[i] = a.Value
	}
	return vs, nil
}

type rows struct {
	r driver.Rows
	w *connector
}

func (r *rows) Columns() []string              { return r.r.Columns() }
func (r *rows) Close() error                   { return r.w.wrap(r.r.Close()) }
func (r *rows) Next(dest []driver.Value) error { return r.w.wrap(r.r.Next(dest)) }

func (r *rows) HasNextResultSet() bool {
	if n, ok := r.r.(driver.RowsNextResultSet); ok {
		return n.HasNextResultSet()
	}
	return false
}

func (r *rows) NextResultSet() error {
	if n, ok := r.r.(driver.RowsNextResultSet); ok {
		return r.w.wrap(n.NextResultSet())
	}
	return io.EOF
}
