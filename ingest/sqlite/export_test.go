package sqlite

import "strings"

// VersionBefore is the schema version just before the first migration whose
// SQL contains sql: a test that takes a store back to the schema before a
// table existed sets PRAGMA user_version to it (the migrations after it run
// again on Open, which they may).
func VersionBefore(sql string) int {
	for i, m := range migrations {
		if strings.Contains(m, sql) {
			return i
		}
	}
	panic("no migration contains " + sql)
}
