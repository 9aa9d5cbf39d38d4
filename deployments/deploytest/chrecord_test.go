package deploytest

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"
)

// step is one statement of a replay plan: SQL with its arguments bound, and
// for a query the rows ClickHouse 18.16 answered (compared by the replay
// unless Compare is false: version(), system tables).
type step struct {
	Kind    string  `json:"kind"` // "exec", "query", "insert"
	SQL     string  `json:"sql"`
	Rows    [][]any `json:"rows,omitempty"`
	Compare bool    `json:"compare"`
	What    string  `json:"what,omitempty"` // where the statement comes from
}

// recorder is a driver.Conn that forwards everything to the real connection
// and records the statements (queries with their answers, inserts as
// INSERT … VALUES) for a replay on another server.
type recorder struct {
	driver.Conn
	mu    sync.Mutex
	steps []step
	what  string
}

func (r *recorder) add(s step) *step {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.What = r.what
	r.steps = append(r.steps, s)
	return &r.steps[len(r.steps)-1]
}

// label names the statements recorded from now on.
func (r *recorder) label(what string) {
	r.mu.Lock()
	r.what = what
	r.mu.Unlock()
}

func (r *recorder) snapshot() []step {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]step(nil), r.steps...)
}

var noCompare = regexp.MustCompile(`(?i)version\(\)|system\.|pending_instances`)

// externalTable: a query reading an external table (sent with the query as
// data) is replayed with every instance of the table raw_samples instead.
var externalTable = regexp.MustCompile(`\bIN pending_instances\b`)

func (r *recorder) Exec(ctx context.Context, query string, args ...any) error {
	err := r.Conn.Exec(ctx, query, args...)
	if err == nil {
		r.add(step{Kind: "exec", SQL: mustBind(query, args)})
	}
	return err
}

func (r *recorder) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	rows, err := r.Conn.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return &recRows{Rows: rows, r: r, sql: mustBind(query, args)}, nil
}

func (r *recorder) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	return &recRow{Row: r.Conn.QueryRow(ctx, query, args...), r: r, sql: mustBind(query, args)}
}

func (r *recorder) Select(context.Context, any, string, ...any) error {
	panic("recorder: Select is not recorded; add it")
}

func (r *recorder) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := r.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil {
		return nil, err
	}
	return &recBatch{Batch: b, r: r, insert: query, cols: map[int][]string{}}, nil
}

func (r *recorder) replaySQL(sql string) (string, bool) {
	compare := !noCompare.MatchString(sql)
	if m := regexp.MustCompile("FROM (`[^`]+`)\\.raw_samples").FindStringSubmatch(sql); externalTable.MatchString(sql) && m != nil {
		sql = externalTable.ReplaceAllString(sql, "IN (SELECT instance_id FROM "+m[1]+".raw_samples)")
	}
	return sql, compare
}

type recRows struct {
	driver.Rows
	r    *recorder
	sql  string
	rows [][]any
	done bool
}

func (x *recRows) Scan(dest ...any) error {
	err := x.Rows.Scan(dest...)
	if err == nil {
		x.rows = append(x.rows, values(dest))
	}
	return err
}

func (x *recRows) ScanStruct(any) error { panic("recorder: ScanStruct is not recorded; add it") }

func (x *recRows) finish() {
	if x.done {
		return
	}
	x.done = true
	if x.Rows.Err() != nil {
		return
	}
	sql, compare := x.r.replaySQL(x.sql)
	rows := x.rows
	if rest, ok := strings.CutPrefix(sql, "SELECT runs FROM "); ok && strings.Contains(sql, ".run_packs ") {
		// A run pack is bytes, which the replay's JSON cannot carry: compare
		// them as hex on both servers.
		sql, rows = "SELECT hex(runs) FROM "+rest, hexRows(rows)
	}
	x.r.add(step{Kind: "query", SQL: sql, Rows: rows, Compare: compare})
}

// hexRows is rows with every []byte or string value as upper-case hex, as
// ClickHouse's hex() writes it.
func hexRows(rows [][]any) [][]any {
	out := make([][]any, len(rows))
	for i, row := range rows {
		for _, v := range row {
			switch b := v.(type) {
			case []byte:
				v = strings.ToUpper(hex.EncodeToString(b))
			case string:
				v = strings.ToUpper(hex.EncodeToString([]byte(b)))
			}
			out[i] = append(out[i], v)
		}
	}
	return out
}

func (x *recRows) Next() bool {
	if x.Rows.Next() {
		return true
	}
	x.finish()
	return false
}

func (x *recRows) Close() error {
	// A query closed before its last row is still replayed, without answers
	// to compare (the reader stopped early).
	if !x.done {
		x.done = true
		sql, _ := x.r.replaySQL(x.sql)
		x.r.add(step{Kind: "query", SQL: sql})
	}
	return x.Rows.Close()
}

type recRow struct {
	driver.Row
	r   *recorder
	sql string
}

func (x *recRow) Scan(dest ...any) error {
	err := x.Row.Scan(dest...)
	if err == nil {
		sql, compare := x.r.replaySQL(x.sql)
		x.r.add(step{Kind: "query", SQL: sql, Rows: [][]any{values(dest)}, Compare: compare})
	}
	return err
}

func (x *recRow) ScanStruct(any) error { panic("recorder: ScanStruct is not recorded; add it") }

// recBatch records the columns appended to a batch as SQL literals and, at
// each Flush or Send, the block as one INSERT … VALUES.
type recBatch struct {
	driver.Batch
	r      *recorder
	insert string
	cols   map[int][]string
}

type recColumn struct {
	driver.BatchColumn
	b *recBatch
	i int
}

func (b *recBatch) Column(i int) driver.BatchColumn {
	return &recColumn{BatchColumn: b.Batch.Column(i), b: b, i: i}
}

func (c *recColumn) Append(v any) error {
	err := c.BatchColumn.Append(v)
	if err == nil {
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Slice {
			panic(fmt.Sprintf("recorder: column append of %T", v))
		}
		for i := range rv.Len() {
			c.b.cols[c.i] = append(c.b.cols[c.i], literal(rv.Index(i).Interface()))
		}
	}
	return err
}

func (c *recColumn) AppendRow(any) error { panic("recorder: AppendRow is not recorded; add it") }

func (b *recBatch) Append(...any) error { panic("recorder: row Append is not recorded; add it") }

func (b *recBatch) block() {
	if len(b.cols) == 0 {
		return
	}
	n := len(b.cols[0])
	var sb strings.Builder
	sb.WriteString(b.insert)
	sb.WriteString(" VALUES ")
	for row := range n {
		if row > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for i := range len(b.cols) {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(b.cols[i][row])
		}
		sb.WriteByte(')')
	}
	b.cols = map[int][]string{}
	b.r.add(step{Kind: "insert", SQL: sb.String()})
}

func (b *recBatch) Flush() error {
	err := b.Batch.Flush()
	if err == nil {
		b.block()
	}
	return err
}

func (b *recBatch) Send() error {
	err := b.Batch.Send()
	if err == nil {
		b.block()
	}
	return err
}

// values are the scanned values, dereferenced, as JSON values.
func values(dest []any) []any {
	out := make([]any, len(dest))
	for i, d := range dest {
		v := reflect.ValueOf(d)
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v = reflect.Value{}
				break
			}
			v = v.Elem()
		}
		if !v.IsValid() {
			continue // NULL
		}
		switch x := v.Interface().(type) {
		case time.Time:
			out[i] = x.UTC().Format("2006-01-02 15:04:05")
		case decimal.Decimal:
			out[i] = x.String()
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				out[i] = strconv.FormatFloat(x, 'g', -1, 64)
			} else {
				out[i] = x
			}
		default:
			out[i] = x
		}
	}
	return out
}

// literal writes v as a ClickHouse SQL literal.
func literal(v any) string {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || (rv.Kind() == reflect.Pointer && rv.IsNil()) {
		return "NULL"
	}
	if rv.Kind() == reflect.Pointer {
		return literal(rv.Elem().Interface())
	}
	switch x := v.(type) {
	case []byte:
		return "unhex('" + hex.EncodeToString(x) + "')" // bytes (a run pack) survive the plan's JSON
	case string:
		if !utf8.ValidString(x) {
			return "unhex('" + hex.EncodeToString([]byte(x)) + "')"
		}
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(x) + "'"
	case time.Time:
		return "'" + x.UTC().Format("2006-01-02 15:04:05") + "'"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case bool:
		if x {
			return "1"
		}
		return "0"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x)
	}
	panic(fmt.Sprintf("recorder: no literal for %T", v))
}

// mustBind replaces the positional ? of query (outside quotes) with args as
// literals, as clickhouse-go does before it sends a query.
func mustBind(query string, args []any) string {
	if len(args) == 0 {
		return query
	}
	var b strings.Builder
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(query) {
				i++
				b.WriteByte(query[i])
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '`' || c == '"':
			quote = c
			b.WriteByte(c)
		case c == '?':
			if n >= len(args) {
				panic("recorder: more ? than arguments in " + query)
			}
			b.WriteString(literal(args[n]))
			n++
		default:
			b.WriteByte(c)
		}
	}
	if n != len(args) {
		panic(fmt.Sprintf("recorder: %d arguments for %d ? in %s", len(args), n, query))
	}
	return b.String()
}
