// Package clickhouse holds cardhour's ClickHouse schema: versioned migrations as
// embedded SQL files. ingest/clickhouse applies them (cardhour migrate) and
// records each applied version in the table schema_migrations.
//
// The DDL must run on ClickHouse 18.16 and on current releases, so the files use
// placeholders that the runner fills according to version():
//
//	{{LC_STRING}}  LowCardinality(String) on servers >= 20.1, else String
//	{{RAW_TTL}}    "TTL ts + INTERVAL n DAY" on servers >= 19.6 when a raw
//	               retention is configured, else empty
package clickhouse

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var files embed.FS

// Migration is one schema change: version N from the file NNNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string // with placeholders; see Render
}

// Migrations returns every embedded migration in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(files, "migrations")
	if err != nil {
		return nil, fmt.Errorf("cannot list embedded migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %q: want NNNN_name.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migration version %d is used by both %q and %q", v, other, name)
		}
		seen[v] = name
		b, err := files.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("cannot read migration %q: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: rest, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Features are the server capabilities the DDL depends on.
type Features struct {
	LowCardinality bool
	TTL            bool
}

// FeaturesFor derives Features from a version() string such as "18.16.1" or
// "24.8.4.13".
func FeaturesFor(version string) (Features, error) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return Features{}, fmt.Errorf("cannot parse ClickHouse version %q", version)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return Features{}, fmt.Errorf("cannot parse ClickHouse version %q", version)
	}
	atLeast := func(ma, mi int) bool { return major > ma || (major == ma && minor >= mi) }
	return Features{LowCardinality: atLeast(20, 1), TTL: atLeast(19, 6)}, nil
}

// Render fills a migration's placeholders for a server with features f.
// rawRetentionDays <= 0 means raw samples are kept forever.
func Render(sql string, f Features, rawRetentionDays int) string {
	lc := "String"
	if f.LowCardinality {
		lc = "LowCardinality(String)"
	}
	ttl := ""
	if f.TTL && rawRetentionDays > 0 {
		ttl = fmt.Sprintf("TTL ts + INTERVAL %d DAY", rawRetentionDays)
	}
	// Comment lines are dropped: the statement sent is the DDL alone.
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimSpace(strings.NewReplacer("{{LC_STRING}}", lc, "{{RAW_TTL}}", ttl).Replace(b.String()))
}
