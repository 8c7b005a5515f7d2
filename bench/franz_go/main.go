// Command franzgo is the bench's `franz-go` copier: a consume -> produce loop over franz-go (pure Go, no cgo),
// standing in for what a Go shop writes in an afternoon to copy a topic, i.e. the data path of Redpanda
// Connect's `kafka_franz` input -> output (and of its migrator): one group consumer reading the source from
// the start, one idempotent producer writing each record to the same partition of the destination with the
// record's key, value, headers and timestamp, compressed with the chosen codec and batched like transcoder's
// lane (ProducerBatchMaxBytes = batch.size, ProducerLinger = linger.ms). No offsets committed, no metrics.
//
//	franzgo --bootstrap HOST:PORT --source T --destination T2 --codec zstd [--level 3] --records N
//	        [--batch-max-bytes 1048576] [--linger-ms 500] [--max-buffered 50000] [--fetch-max-partition-bytes 1048576]
//
// It exits 0 once --records records are read and all are acknowledged; any consume or produce error is fatal
// (exit 1, one line naming topic/partition/offset). bench/copiers.py builds it (`build_franz_go`) and starts
// it (`start_franz_go`), like bench/native_floor, which does the same over librdkafka.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "franzgo: "+format+"\n", args...)
	os.Exit(1)
}

// compression maps the bench's codec and level (-1: the client's default) to franz-go's codec. franz-go's
// WithLevel takes each library's own level type, not the number librdkafka and Java take, so:
//   - gzip: 1-9 as is, klauspost/compress's levels (its default, -1, is its flate's level 5; 0 would store,
//     so it is refused);
//   - lz4: 0 is fast (the default), 1-9 pierrec/lz4's Level1-Level9 (it has no 10-12);
//   - zstd: 1-22 through klauspost/compress's EncoderLevelFromZstd, which has four speeds
//     (1-2 fastest, 3-5 default, 6-9 better, 10-22 best);
//   - snappy, none: no levels.
func compression(codec string, level int) kgo.CompressionCodec {
	if level >= 0 && (codec == "snappy" || codec == "none") {
		fatal("codec %s has no levels", codec)
	}
	switch codec {
	case "none":
		return kgo.NoCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "gzip":
		if level < 0 {
			return kgo.GzipCompression() // klauspost/compress's default: its level 5
		}
		if level < 1 || level > 9 {
			fatal("gzip level %d: franz-go takes 1-9", level)
		}
		return kgo.GzipCompression().WithLevel(level)
	case "lz4":
		levels := []lz4.CompressionLevel{lz4.Fast, lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5,
			lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
		if level < 0 {
			return kgo.Lz4Compression() // fast
		}
		if level >= len(levels) {
			fatal("lz4 level %d: pierrec/lz4 takes 0 (fast) to 9", level)
		}
		return kgo.Lz4Compression().WithLevel(int(levels[level]))
	case "zstd":
		if level < 0 {
			return kgo.ZstdCompression() // SpeedDefault, about zstd level 3
		}
		if level < 1 || level > 22 {
			fatal("zstd level %d: 1-22", level)
		}
		return kgo.ZstdCompression().WithLevel(int(zstd.EncoderLevelFromZstd(level)))
	}
	fatal("unknown codec %q (none, gzip, snappy, lz4, zstd)", codec)
	return kgo.CompressionCodec{}
}

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	source := flag.String("source", "", "topic to copy")
	dest := flag.String("destination", "", "topic to copy into (as many partitions as the source)")
	codec := flag.String("codec", "none", "none, gzip, snappy, lz4 or zstd")
	level := flag.Int("level", -1, "codec level (-1: franz-go's default: gzip klauspost 5, lz4 fast, zstd SpeedDefault)")
	records := flag.Int64("records", 0, "records to copy, then exit once all are acknowledged")
	maxBytes := flag.Int("batch-max-bytes", 1_048_576, "ProducerBatchMaxBytes (uncompressed bytes of a batch)")
	lingerMs := flag.Int("linger-ms", 500, "ProducerLinger in milliseconds")
	maxBuffered := flag.Int("max-buffered", 50_000, "records produced but not yet acknowledged, at most")
	fetchPartition := flag.Int("fetch-max-partition-bytes", 1<<20,
		"FetchMaxPartitionBytes: a Fetch's bytes per partition (Kafka's max.partition.fetch.bytes; franz-go's default 1 MiB)")
	flag.Parse()
	if *source == "" || *dest == "" || *records <= 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "franzgo: --source, --destination and --records N > 0 are required")
		flag.Usage()
		os.Exit(2)
	}
	seeds := kgo.SeedBrokers(*bootstrap)
	logger := kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil))

	// As native_floor: a consumer group of its own, from the start (auto.offset.reset earliest), no commits.
	consumer, err := kgo.NewClient(seeds, logger,
		kgo.ConsumerGroup("franz-go-"+*dest),
		kgo.ConsumeTopics(*source),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxPartitionBytes(int32(*fetchPartition)),
	)
	if err != nil {
		fatal("consumer: %v", err)
	}
	defer consumer.Close()

	producer, err := kgo.NewClient(seeds, logger,
		kgo.RecordPartitioner(kgo.ManualPartitioner()), // each record to its source partition
		kgo.ProducerBatchCompression(compression(*codec, *level)),
		kgo.ProducerBatchMaxBytes(int32(*maxBytes)),
		kgo.ProducerLinger(time.Duration(*lingerMs)*time.Millisecond),
		kgo.MaxBufferedRecords(*maxBuffered), // Produce blocks beyond this (and stops lingering)
		kgo.RequiredAcks(kgo.AllISRAcks()),   // idempotent writes are franz-go's default; they need acks=all
	)
	if err != nil {
		fatal("producer: %v", err)
	}
	defer producer.Close()

	ctx := context.Background()
	var acked atomic.Int64
	var read int64
	for read < *records {
		fetches := consumer.PollRecords(ctx, int(min(*records-read, 10_000)))
		if fetches.IsClientClosed() {
			fatal("consumer closed after %d records", read)
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			fatal("consume %s/%d (after %d records): %v", topic, partition, read, err)
		})
		fetches.EachRecord(func(in *kgo.Record) {
			out := &kgo.Record{
				Topic:     *dest,
				Partition: in.Partition,
				Key:       in.Key,
				Value:     in.Value,
				Headers:   in.Headers,
				Timestamp: in.Timestamp,
			}
			offset := in.Offset
			producer.Produce(ctx, out, func(r *kgo.Record, err error) {
				if err != nil {
					fatal("produce %s/%d (source %s/%d offset %d): %v", r.Topic, r.Partition, *source,
						r.Partition, offset, err)
				}
				acked.Add(1)
			})
			read++
		})
	}

	flushCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := producer.Flush(flushCtx); err != nil {
		fatal("flush %s: %v (%d of %d records acknowledged)", *dest, err, acked.Load(), read)
	}
	fmt.Fprintf(os.Stderr, "copied %d records, 0 failed\n", acked.Load())
}
