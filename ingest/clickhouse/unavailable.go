package clickhouse

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cardhour/cardhour/internal/storefail"
)

// unavailable is err as a storefail error when it says that ClickHouse
// cannot answer for now (unreachable, restarting, overloaded, timed out,
// disk full, read-only: storefail.ClickHouse, with the wait its cause
// suggests: storefail.WrapClickHouse), so that the API answers 503
// with the cause instead of 500; other errors are returned as they are.
func unavailable(err error) error { return storefail.WrapClickHouse(err) }

// classifiedConn classifies, at the driver, every error of a query, an
// insert, a row read or the end of a result (unavailable), whatever the
// store's code wraps it in: every read and write path is covered, not only
// the ones that remember to. Methods the store does not use pass through.
type classifiedConn struct{ driver.Conn }

func (c classifiedConn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	r, err := c.Conn.Query(ctx, query, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	return classifiedRows{r}, nil
}

func (c classifiedConn) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	return classifiedRow{c.Conn.QueryRow(ctx, query, args...)}
}

func (c classifiedConn) Select(ctx context.Context, dest any, query string, args ...any) error {
	return unavailable(c.Conn.Select(ctx, dest, query, args...))
}

func (c classifiedConn) Exec(ctx context.Context, query string, args ...any) error {
	return unavailable(c.Conn.Exec(ctx, query, args...))
}

func (c classifiedConn) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil {
		return nil, unavailable(err)
	}
	return classifiedBatch{b}, nil
}

func (c classifiedConn) Ping(ctx context.Context) error { return unavailable(c.Conn.Ping(ctx)) }

func (c classifiedConn) ServerVersion() (*driver.ServerVersion, error) {
	v, err := c.Conn.ServerVersion()
	return v, unavailable(err)
}

type classifiedRows struct{ driver.Rows }

func (r classifiedRows) Scan(dest ...any) error    { return unavailable(r.Rows.Scan(dest...)) }
func (r classifiedRows) ScanStruct(dest any) error { return unavailable(r.Rows.ScanStruct(dest)) }
func (r classifiedRows) Totals(dest ...any) error  { return unavailable(r.Rows.Totals(dest...)) }
func (r classifiedRows) Close() error              { return unavailable(r.Rows.Close()) }
func (r classifiedRows) Err() error                { return unavailable(r.Rows.Err()) }

type classifiedRow struct{ driver.Row }

func (r classifiedRow) Err() error                { return unavailable(r.Row.Err()) }
func (r classifiedRow) Scan(dest ...any) error    { return unavailable(r.Row.Scan(dest...)) }
func (r classifiedRow) ScanStruct(dest any) error { return unavailable(r.Row.ScanStruct(dest)) }

type classifiedBatch struct{ driver.Batch }

func (b classifiedBatch) Append(v ...any) error    { return unavailable(b.Batch.Append(v...)) }
func (b classifiedBatch) AppendStruct(v any) error { return unavailable(b.Batch.AppendStruct(v)) }
func (b classifiedBatch) Flush() error             { return unavailable(b.Batch.Flush()) }
func (b classifiedBatch) Send() error              { return unavailable(b.Batch.Send()) }
func (b classifiedBatch) Abort() error             { return unavailable(b.Batch.Abort()) }
func (b classifiedBatch) Close() error             { return unavailable(b.Batch.Close()) }
