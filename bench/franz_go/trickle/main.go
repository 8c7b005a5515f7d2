// Command trickle is the bench's compiled latency driver: a live stream into a copier's source at a fixed rate,
// and an independent reader of the copier's destination that times each record from its timestamp (set when it
// is produced) to the moment it is read. bench/measure.py's Python trickle does the same up to ~50,000 records/s;
// this one reaches the rates a lane copies at (hundreds of thousands per second) on the same machine.
//
//	trickle --bootstrap HOST:PORT --source T --destination T2 --replay FILE --rate R
//	        [--warm-seconds 3] [--timed-records 10000] [--timeout-seconds 120]
//
// FILE holds the records to replay, one per line: base64 key (empty: no key), a tab, base64 value. They are sent
// round and round at --rate records/s, each stamped with the time it is handed to the producer: for
// --warm-seconds untimed (the producer's id, the copier's first batches), then --timed-records with the
// `bench-timed` header, then untimed again until every timed record is read from the destination (so the last
// ones are copied as on a live stream, not in a batch only linger closes). The reader starts at the
// destination's end (looked up while the untimed records go).
//
// It prints one JSON object on stdout: the rate asked and reached, the timed records, p50/p99 of the source
// timestamp -> read latency, the same over every record read (untimed ones too: what a copier's own figures
// cover), and p50/p99 of the producer's own share (timestamp -> acknowledgement), which is the driver's, not
// the copier's. Any produce or consume error, or a timed record not read within
// --timeout-seconds, exits 1 with one line.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const timedHeader = "bench-timed"

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "trickle: "+format+"\n", args...)
	os.Exit(1)
}

type record struct{ key, value []byte }

func readRecords(path string) []record {
	f, err := os.Open(path)
	if err != nil {
		fatal("%v", err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			fatal("%s line %d: not `base64 key<TAB>base64 value`", path, line)
		}
		key, err1 := base64.StdEncoding.DecodeString(k)
		value, err2 := base64.StdEncoding.DecodeString(v)
		if err1 != nil || err2 != nil {
			fatal("%s line %d: not base64", path, line)
		}
		if k == "" {
			key = nil
		}
		out = append(out, record{key, value})
	}
	if err := sc.Err(); err != nil {
		fatal("%s: %v", path, err)
	}
	if len(out) == 0 {
		fatal("%s: no records", path)
	}
	return out
}

// quantile of sorted seconds, nearest rank
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

type result struct {
	Rate       float64 `json:"rate"`
	Reached    float64 `json:"reached_rate"`
	Timed      int     `json:"timed"`
	Sent       int64   `json:"sent"`
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
	ProduceP50 float64 `json:"produce_p50"`
	ProduceP99 float64 `json:"produce_p99"`
	// every record read (the untimed ones around the timed span too), as the copier's own latency figures count
	AllRead int     `json:"all_read"`
	AllP50  float64 `json:"all_p50"`
	AllP99  float64 `json:"all_p99"`
}

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	source := flag.String("source", "", "topic the copier copies from (the trickle goes here)")
	dest := flag.String("destination", "", "topic the copier copies to (read from its end)")
	file := flag.String("replay", "", "records to replay: base64 key<TAB>base64 value per line")
	rate := flag.Float64("rate", 2000, "records per second")
	warm := flag.Float64("warm-seconds", 3, "untimed stream before the timed one")
	timed := flag.Int64("timed-records", 10_000, "timed records, sent after --warm-seconds")
	timeout := flag.Float64("timeout-seconds", 120, "a timed record not read within this fails the run")
	flag.Parse()
	if *source == "" || *dest == "" || *file == "" || *rate <= 0 || *timed < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "trickle: --source, --destination, --replay FILE, --rate > 0 and --timed-records >= 1 "+
			"are required")
		flag.Usage()
		os.Exit(2)
	}
	records := readRecords(*file)
	seeds := kgo.SeedBrokers(*bootstrap)
	logger := kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil))
	ctx := context.Background()

	reader, err := kgo.NewClient(seeds, logger, kgo.ConsumeTopics(*dest),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		fatal("reader: %v", err)
	}
	defer reader.Close()
	// it looks up the destination's end offsets in the background: well before the timed span (--warm-seconds)

	producer, err := kgo.NewClient(seeds, logger, kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		fatal("producer: %v", err)
	}
	defer producer.Close()

	var timedSent atomic.Int64 // timed records sent; -1 until the timed span is over
	timedSent.Store(-1)
	var mu sync.Mutex
	var latencies, produceLatencies []float64
	var everyRecord []float64 // every record read, untimed ones too: what the copier's own figures cover
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		n := 0
		for {
			fetches := reader.PollFetches(ctx)
			fetches.EachError(func(t string, p int32, err error) { fatal("reading %s/%d: %v", t, p, err) })
			now := time.Now()
			fetches.EachRecord(func(r *kgo.Record) {
				d := now.Sub(r.Timestamp).Seconds()
				mu.Lock()
				everyRecord = append(everyRecord, d)
				if len(r.Headers) == 1 && r.Headers[0].Key == timedHeader {
					latencies = append(latencies, d)
					n++
				}
				mu.Unlock()
			})
			if total := timedSent.Load(); total >= 0 && int64(n) >= total {
				return
			}
		}
	}()

	hdr := []kgo.RecordHeader{{Key: timedHeader, Value: []byte("1")}}
	// records [first, last) of the stream are timed: --timed-records after --warm-seconds at --rate
	first := int64(*warm * *rate)
	last := first + *timed
	start := time.Now()
	deadline := start.Add(time.Duration((*warm + float64(*timed) / *rate + *timeout) * float64(time.Second)))
	var sent int64
	var firstSent, lastSent time.Time
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-readDone:
			goto done
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			mu.Lock()
			got := len(latencies)
			mu.Unlock()
			fatal("%d of %d timed records reached %s within %.0f s", got, last-first, *dest, *timeout)
		}
		for due := int64(time.Since(start).Seconds()**rate) + 1; sent < due; sent++ {
			rec := records[sent%int64(len(records))]
			out := &kgo.Record{Topic: *source, Key: rec.key, Value: rec.value, Timestamp: time.Now()}
			isTimed := sent >= first && sent < last
			if isTimed {
				out.Headers = hdr
				if sent == first {
					firstSent = out.Timestamp
				}
				lastSent = out.Timestamp
			}
			producer.Produce(ctx, out, func(r *kgo.Record, err error) {
				if err != nil {
					fatal("produce %s/%d: %v", r.Topic, r.Partition, err)
				}
				if isTimed {
					d := time.Since(r.Timestamp).Seconds()
					mu.Lock()
					produceLatencies = append(produceLatencies, d)
					mu.Unlock()
				}
			})
			if sent == last-1 {
				timedSent.Store(last - first)
			}
		}
	}
done:
	if err := producer.Flush(ctx); err != nil {
		fatal("flush %s: %v", *source, err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(latencies)
	slices.Sort(everyRecord)
	slices.Sort(produceLatencies)
	out := result{
		Rate: *rate, Timed: len(latencies), Sent: sent,
		Reached:    float64(last-first-1) / max(lastSent.Sub(firstSent).Seconds(), 1e-9),
		P50:        quantile(latencies, 0.5),
		P99:        quantile(latencies, 0.99),
		AllRead:    len(everyRecord),
		AllP50:     quantile(everyRecord, 0.5),
		AllP99:     quantile(everyRecord, 0.99),
		ProduceP50: quantile(produceLatencies, 0.5),
		ProduceP99: quantile(produceLatencies, 0.99),
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fatal("%v", err)
	}
}
