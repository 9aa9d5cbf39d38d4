package clickhouse

import (
	"context"
	"fmt"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/cardhour/cardhour/schemas"
)

// InstanceSamples implements reads.InstanceRows: raw_samples is sorted
// by (instance_id, start_ms), so the instances (sent as an external table)
// and the range of start_ms select index ranges, where a window of ts
// alone would scan the month's partition. FINAL collapses replays.
func (s *Store) InstanceSamples(ctx context.Context, instances []string, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	if len(instances) == 0 {
		return nil
	}
	wanted, err := ext.NewTable("pending_instances", ext.Column("instance_id", "String"))
	if err != nil {
		return fmt.Errorf("cannot build the instance table: %w", err)
	}
	for _, id := range instances {
		if err := wanted.Append(id); err != nil {
			return fmt.Errorf("cannot build the instance table: %w", err)
		}
	}
	rows, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(wanted)),
		"SELECT "+heldColumns+" FROM "+s.table("raw_samples")+" FINAL WHERE instance_id IN pending_instances AND start_ms >= "+itoa(fromMS)+
			" AND start_ms < "+itoa(toMS)+" AND ts >= toDateTime("+itoa(max(fromMS/1000-1, 0))+") AND project != ''")
	if err != nil {
		return classify(fmt.Errorf("cannot read the samples of %d instances: %w", len(instances), err))
	}
	return scanHeld(rows, fn)
}
