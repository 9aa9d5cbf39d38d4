// Command bench-ingest is the helper of scripts/bench-ingest.sh:
//
//	bench-ingest produce  --brokers B --topic T --partitions N [--replication-factor R] [--rate S] FILE.jsonl   create T, publish through the collector's sink, framed as it frames them (--per-sample: one message per sample; --rate: at most S samples/s, as a fleet would)
//	bench-ingest waitlag  --brokers B --topic T --group G                   wait until G committed all of T; print timings
//	bench-ingest lag      --brokers B --topic T --group G [--every D]       print the group's lag (the topic's end less its committed offsets, in messages) every D until killed
//	bench-ingest readcost --brokers B --topic T --group G --samples N [--decode]  consume T, print this process's CPU seconds
//	bench-ingest tsv      FILE.jsonl > FILE.tsv                             the raw_samples rows, for clickhouse-client
//	bench-ingest fill     --store DSN --instances N --interval S --samples M --start YYYY-MM
//	                                                                        generate and ingest in-process (no file, no Kafka)
//	bench-ingest replay   [--store DSN] --instances N --interval S --month YYYY-MM --passes P
//	                                                                        a month written P times into one running writer: rows kept and month close after pass 1 and after pass P
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/collector/kafkapub"
	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench-ingest produce|waitlag|tsv|fill|replay …")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(os.Args[2:])
	case "waitlag":
		err = waitlag(os.Args[2:])
	case "tsv":
		err = tsv(os.Args[2:])
	case "fill":
		err = fill(os.Args[2:])
	case "readcost":
		err = readcost(os.Args[2:])
	case "replay":
		err = replay(os.Args[2:])
	case "lag":
		err = lag(os.Args[2:])
	case "deltopics":
		err = deltopics(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-ingest:", err)
		os.Exit(1)
	}
}

func produce(args []string) error {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:19092", "")
	topic := fs.String("topic", "", "")
	parts := fs.Int("partitions", 4, "")
	replicas := fs.Int("replication-factor", 1, "replicas of the topic (3 on the testenv profile kcluster)")
	compression := fs.String("compression", "zstd", "as cardhour collect --compression")
	perSample := fs.Bool("per-sample", false, "one message per sample, keyed by instance (the framing before node messages), for the framing comparison")
	rate := fs.Float64("rate", 0, "publish at most this many samples per second, in chunks of a tenth of a second (0: as fast as the brokers take them)")
	_ = fs.Parse(args)
	chunk := 100000
	if *rate > 0 {
		chunk = max(int(*rate/10), 1)
	}
	ctx := context.Background()
	c := &kafka.Client{Addr: kafka.TCP(strings.Split(*brokers, ",")...), Timeout: 30 * time.Second}
	if _, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: *topic, NumPartitions: *parts, ReplicationFactor: *replicas}}}); err != nil {
		return err
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read-only
	// The collector's own Kafka sink (its zstd codec, its batching), fed with
	// messages framed as the collector frames them: consecutive samples of a
	// node (the file is ordered by time, then node) share a message.
	w, err := kafkapub.NewKafkaSink(kafkapub.KafkaConfig{Brokers: strings.Split(*brokers, ","), Topic: *topic, Compression: *compression})
	if err != nil {
		return err
	}
	defer w.Close() //nolint:errcheck // a benchmark helper; the writes above were acknowledged
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	dec := schemas.NewDecoder()
	var samples []schemas.Sample
	var recs []spool.Record
	n, msgs := 0, 0
	t0 := time.Now()
	send := func() error {
		recs = recs[:0]
		if *perSample {
			for i := range samples {
				recs = append(recs, spool.Record{Key: []byte(samples[i].InstanceID), Value: samples[i].AppendJSON(nil)})
			}
		} else {
			buf, spans := schemas.AppendMessages(nil, nil, samples, 0)
			for _, m := range spans {
				recs = append(recs, spool.Record{Key: []byte(m.Key), Value: buf[m.Start:m.End]})
			}
		}
		for i := 0; i < len(recs); i += 5000 {
			if err := w.Write(ctx, recs[i:min(i+5000, len(recs))]); err != nil {
				return err
			}
		}
		n += len(samples)
		msgs += len(recs)
		samples = samples[:0]
		if *rate > 0 {
			time.Sleep(time.Until(t0.Add(time.Duration(float64(n) / *rate * float64(time.Second)))))
		}
		return nil
	}
	for sc.Scan() {
		var s schemas.Sample
		if err := dec.Decode(sc.Bytes(), &s); err != nil {
			return err
		}
		if len(samples) >= chunk && samples[len(samples)-1].Node != s.Node {
			if err := send(); err != nil {
				return err
			}
		}
		samples = append(samples, s)
	}
	if err := send(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "produced %d samples in %d messages in %s\n", n, msgs, time.Since(t0).Round(time.Millisecond))
	return sc.Err()
}

// partitionsOf is a client of brokers (comma-separated), the partitions of
// topic, and a request for each one's end offset.
func partitionsOf(ctx context.Context, brokers, topic string) (*kafka.Client, []int, []kafka.OffsetRequest, error) {
	c := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 30 * time.Second}
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, nil, nil, err
	}
	var parts []int
	var reqs []kafka.OffsetRequest
	for _, p := range meta.Topics[0].Partitions {
		parts = append(parts, p.ID)
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
	}
	return c, parts, reqs, nil
}

func waitlag(args []string) error {
	fs := flag.NewFlagSet("waitlag", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:19092", "")
	topic := fs.String("topic", "", "")
	group := fs.String("group", "", "")
	_ = fs.Parse(args)
	ctx := context.Background()
	c, parts, reqs, err := partitionsOf(ctx, *brokers, *topic)
	if err != nil {
		return err
	}
	lo, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{*topic: reqs}})
	if err != nil {
		return err
	}
	var total int64
	for _, p := range lo.Topics[*topic] {
		total += p.LastOffset
	}
	t0 := time.Now()
	var first time.Time
	for {
		of, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: *group, Topics: map[string][]int{*topic: parts}})
		if err == nil {
			var done int64
			for _, p := range of.Topics[*topic] {
				done += max(p.CommittedOffset, 0)
			}
			if done > 0 && first.IsZero() {
				first = time.Now()
			}
			if done >= total {
				all := time.Since(t0)
				fmt.Printf("messages=%d wall_s=%.2f first_commit_s=%.2f\n", total, all.Seconds(), first.Sub(t0).Seconds())
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tsv(args []string) error {
	f, err := os.Open(args[0]) //nolint:gosec // G703: a benchmark helper reads the file it is told to
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read-only
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	dec := schemas.NewDecoder()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	now := time.Now().UTC().Format("2006-01-02 15:04:05")
	var b []byte
	for sc.Scan() {
		var s schemas.Sample
		if err := dec.Decode(sc.Bytes(), &s); err != nil {
			return err
		}
		util := `\N`
		if s.UtilKnown {
			util = strconv.FormatFloat(s.Util, 'g', -1, 64)
		}
		b = b[:0]
		b = fmt.Appendf(b, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n",
			time.UnixMilli(s.StartMS).UTC().Format("2006-01-02 15:04:05"), s.StartMS, s.IntervalMS, s.Node, s.GPUUUID, s.GPUModel,
			s.InstanceID, s.Profile, s.Project, s.User, util, s.MemUsed, s.MemTotal, s.Processes, s.UtilSource, now)
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return out.Flush()
}

func fill(args []string) error {
	fs := flag.NewFlagSet("fill", flag.ExitOnError)
	dsn := fs.String("store", "", "")
	instances := fs.Int("instances", 7000, "")
	interval := fs.Int64("interval", 300, "seconds")
	samples := fs.Int64("samples", 1_000_000, "")
	start := fs.String("start", "2026-11", "")
	_ = fs.Parse(args)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := storedsn.Open(ctx, *dsn, storedsn.Options{Logger: log, Mode: storedsn.Write, Migrate: true})
	if err != nil {
		return err
	}
	defer st.Close() //nolint:errcheck // nothing written is pending at close
	loc, _ := time.LoadLocation("Asia/Shanghai")
	p, err := billing.ParsePeriod(*start, loc)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := gen.Write(pw, gen.Config{Samples: *samples, StartMS: p.StartMS(), IntervalMS: *interval * 1000, Instances: *instances, Seed: 42})
		pw.CloseWithError(err)
	}()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
	if err != nil {
		return err
	}
	t0 := time.Now()
	stats, err := ingest.Backfill(ctx, pr, ingest.FileConfig{Writer: w, BatchSize: 100_000})
	if err != nil {
		return err
	}
	fmt.Printf("filled %d samples in %s\n", stats.Valid, time.Since(t0).Round(time.Millisecond))
	return nil
}

// deltopics deletes the benchmark's topics (the shared Kafka keeps no garbage).
// readcost consumes a whole topic in a consumer group with kafka-go's Reader
// (FetchMessage, as ingest does), optionally decoding every line, and prints
// the CPU seconds this process used.
func readcost(args []string) error {
	fs := flag.NewFlagSet("readcost", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:19092", "")
	topic := fs.String("topic", "", "")
	group := fs.String("group", "", "")
	samples := fs.Int("samples", 0, "samples in the topic (stop after that many)")
	decode := fs.Bool("decode", false, "decode every line with the schemas decoder")
	_ = fs.Parse(args)
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(*brokers, ","), GroupID: *group, Topic: *topic,
		MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 250 * time.Millisecond, QueueCapacity: 250, StartOffset: kafka.FirstOffset})
	defer r.Close() //nolint:errcheck // a benchmark helper
	dec := schemas.NewDecoder()
	var s schemas.Sample
	n, msgs := 0, 0
	c0 := cpuSeconds()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for n < *samples {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return err
		}
		msgs++
		for rest := m.Value; len(rest) > 0; n++ {
			var line []byte
			line, rest = schemas.NextLine(rest)
			if *decode {
				if err := dec.Decode(line, &s); err != nil {
					return err
				}
			}
		}
	}
	fmt.Printf("samples=%d messages=%d cpu_s=%.2f\n", n, msgs, cpuSeconds()-c0)
	return nil
}

// cpuSeconds is the user and system CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func deltopics(args []string) error {
	fs := flag.NewFlagSet("deltopics", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:19092", "")
	_ = fs.Parse(args)
	c := &kafka.Client{Addr: kafka.TCP(strings.Split(*brokers, ",")...), Timeout: 30 * time.Second}
	res, err := c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: fs.Args()})
	if err != nil {
		return err
	}
	for t, e := range res.Errors {
		if e != nil && !errors.Is(e, kafka.UnknownTopicOrPartition) {
			return fmt.Errorf("delete topic %s: %w", t, e)
		}
	}
	return nil
}

// lag prints, every --every, the seconds since its start, the topic's end
// offsets and the group's committed offsets summed over the partitions,
// and their difference, until it is killed.
func lag(args []string) error {
	fs := flag.NewFlagSet("lag", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:19092", "")
	topic := fs.String("topic", "", "")
	group := fs.String("group", "", "")
	every := fs.Duration("every", time.Second, "")
	_ = fs.Parse(args)
	ctx := context.Background()
	c, parts, reqs, err := partitionsOf(ctx, *brokers, *topic)
	if err != nil {
		return err
	}
	t0 := time.Now()
	for {
		lo, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{*topic: reqs}})
		of, err2 := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: *group, Topics: map[string][]int{*topic: parts}})
		if err == nil && err2 == nil {
			var end, done int64
			for _, p := range lo.Topics[*topic] {
				end += p.LastOffset
			}
			for _, p := range of.Topics[*topic] {
				done += max(p.CommittedOffset, 0)
			}
			fmt.Printf("t_s=%.1f end=%d committed=%d lag=%d\n", time.Since(t0).Seconds(), end, done, end-done)
		}
		time.Sleep(time.Until(t0.Add(time.Since(t0).Truncate(*every) + *every)))
	}
}
