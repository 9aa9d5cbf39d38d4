package kafkapub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/schemas"
)

// KafkaConfig configures the Kafka sink.
type KafkaConfig struct {
	Brokers      []string // required
	Topic        string   // default schemas.SampleTopicV1
	ClientID     string   // default "cardhour-collector"
	Compression  string   // zstd (default) | lz4 | snappy | gzip | none
	WriteTimeout time.Duration
	// NoAutoCreateTopic stops the writer from asking the broker to create a
	// missing topic (brokers with auto.create.topics.enable=false never do).
	// Production sites create the topic with its partitions up front.
	NoAutoCreateTopic bool
	// TLS: enabled when TLS is true or any file is set.
	TLS                   bool
	TLSCAFile             string
	TLSCertFile           string
	TLSKeyFile            string
	TLSInsecureSkipVerify bool
	// SASL: plain | scram-sha-256 | scram-sha-512 (empty: none).
	SASLMechanism string
	SASLUser      string
	SASLPassword  string
	// Dial, when set, opens every broker connection (tests route it through a
	// gate they control).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Validate reports every problem at once.
func (c *KafkaConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka: at least one broker is required"))
	}
	if _, err := codec(c.Compression); err != nil {
		errs = append(errs, err)
	}
	switch c.SASLMechanism {
	case "", "plain", "scram-sha-256", "scram-sha-512":
		if c.SASLMechanism != "" && c.SASLUser == "" {
			errs = append(errs, errors.New("kafka: SASL needs a user"))
		}
	default:
		errs = append(errs, fmt.Errorf("kafka: SASL mechanism %q: want plain, scram-sha-256 or scram-sha-512", c.SASLMechanism))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("kafka: TLS certificate and key go together"))
	}
	if c.WriteTimeout < 0 {
		errs = append(errs, errors.New("kafka: write timeout must not be negative"))
	}
	return errors.Join(errs...)
}

func codec(name string) (compress.Compression, error) {
	switch name {
	case "", "zstd":
		return kafka.Zstd, nil
	case "lz4":
		return kafka.Lz4, nil
	case "snappy":
		return kafka.Snappy, nil
	case "gzip":
		return kafka.Gzip, nil
	case "none":
		return 0, nil
	}
	return 0, fmt.Errorf("kafka: compression %q: want zstd, lz4, snappy, gzip or none", name)
}

// KafkaSink writes records to a Kafka topic with kafka-go: key = instance_id
// (murmur2 partitioning, as the Java client does, so one instance keeps one
// partition and its order), header schema = cardhour.sample.v1, acks = all.
type KafkaSink struct {
	w       *kafka.Writer
	tr      *kafka.Transport
	timeout time.Duration
	hdr     []kafka.Header
	msgs    []kafka.Message
}

// NewKafkaSink returns a sink; it does not connect until the first write.
func NewKafkaSink(cfg KafkaConfig) (*KafkaSink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		cfg.Topic = schemas.SampleTopicV1
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "cardhour-collector"
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	comp, _ := codec(cfg.Compression)
	tr := &kafka.Transport{ClientID: cfg.ClientID, DialTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second,
		MetadataTTL: 30 * time.Second, Dial: cfg.Dial}
	if cfg.TLS || cfg.TLSCAFile != "" || cfg.TLSCertFile != "" || cfg.TLSInsecureSkipVerify {
		t, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		tr.TLS = t
	}
	if cfg.SASLMechanism != "" {
		m, err := saslMechanism(cfg)
		if err != nil {
			return nil, err
		}
		tr.SASL = m
	}
	var rt kafka.RoundTripper = tr
	if comp == kafka.Zstd {
		// zstd with the collector's own encoder, on this writer only (see leanZstd).
		lz, err := newLeanZstd(tr)
		if err != nil {
			return nil, fmt.Errorf("kafka: zstd: %w", err)
		}
		rt, comp = lz, 0
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        cfg.Topic,
		Balancer:     kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		Compression:  comp,
		BatchSize:    250,     // kafka-go allocates a slice of this many messages per batch: keep it small
		BatchBytes:   1 << 20, // the broker's default message.max.bytes
		BatchTimeout: 5 * time.Millisecond,
		MaxAttempts:  2, // the publisher retries with backoff itself
		WriteTimeout: cfg.WriteTimeout,
		ReadTimeout:  cfg.WriteTimeout,
		Transport:    rt,

		AllowAutoTopicCreation: !cfg.NoAutoCreateTopic,
	}
	return &KafkaSink{w: w, tr: tr, timeout: cfg.WriteTimeout,
		hdr: []kafka.Header{{Key: "schema", Value: []byte(schemas.SampleSchemaV1)}}}, nil
}

func tlsConfig(cfg KafkaConfig) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.TLSInsecureSkipVerify} //nolint:gosec // opt-in flag
	if cfg.TLSCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: cannot read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka: no certificate in CA file %s", cfg.TLSCAFile)
		}
		t.RootCAs = pool
	}
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: cannot load client certificate: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

func saslMechanism(cfg KafkaConfig) (sasl.Mechanism, error) {
	switch cfg.SASLMechanism {
	case "plain":
		return plain.Mechanism{Username: cfg.SASLUser, Password: cfg.SASLPassword}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, cfg.SASLUser, cfg.SASLPassword)
	default:
		return scram.Mechanism(scram.SHA512, cfg.SASLUser, cfg.SASLPassword)
	}
}

// Write sends the records and waits for every acknowledgement.
//
// After a failed write the transport forgets what it knows of the cluster, so
// that the next write asks the brokers afresh. kafka-go's transport caches the
// cluster metadata, and refreshes it only every MetadataTTL (at a random moment
// within it); when its first metadata request failed (the collector started
// while Kafka was unreachable) it caches that error instead, and every write
// fails with it until the next refresh, up to MetadataTTL after Kafka is back.
// kafka-go has no call to refresh the metadata; dropping the transport's
// connection pools (CloseIdleConnections) does it: the next request builds a
// pool, which asks the brokers before it answers.
func (k *KafkaSink) Write(ctx context.Context, recs []spool.Record) error {
	k.msgs = k.msgs[:0]
	for _, r := range recs {
		k.msgs = append(k.msgs, kafka.Message{Key: r.Key, Value: r.Value, Headers: k.hdr})
	}
	ctx, cancel := context.WithTimeout(ctx, k.timeout+time.Duration(len(recs)/1000)*time.Second)
	defer cancel()
	err := k.w.WriteMessages(ctx, k.msgs...)
	if err != nil {
		k.tr.CloseIdleConnections()
	}
	return err
}

// Close closes the writer and the transport's connections.
func (k *KafkaSink) Close() error {
	err := k.w.Close()
	k.tr.CloseIdleConnections()
	return err
}
