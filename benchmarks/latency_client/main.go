// Command latency_client is the load client of benchmarks/runner.py's latency test.
//
// One process, two franz-go clients with their own connections: a producer paced at -rate
// records/s and a consumer reading every partition of -topic directly (no group) from the start.
// Each record's value is 'L' + the unix-nanos time of its Produce call (8 bytes, big endian) +
// padding up to -size bytes, like the Python clients in runner.py. The consumer takes a record's
// receipt time when PollFetches hands it over; latency = receipt - produce timestamp. The
// producer's promise callbacks give the produce -> acknowledged round trip of each record.
//
// It exists so that the load generator is not the suspect: pacing 10 000 records/s and handing
// them over through poll() in Python costs the two Python processes ~0.3 of a core on the 2
// cores they share with the broker; this client does the same work for about half of that.
//
// Output: one JSON line on stdout with the keys of the Python test (sent, seconds, received,
// p50_ms ... max_ms, ack_p50_ms ... ack_max_ms; the first 5% of samples are skipped as runner.py's
// _percentiles does) plus client_cpu_s, this process's own user+sys CPU seconds.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap servers, comma separated")
	topic := flag.String("topic", "", "topic (must exist)")
	partitions := flag.Int("partitions", 6, "number of partitions of the topic; the consumer reads all")
	rate := flag.Int("rate", 10000, "records per second")
	seconds := flag.Float64("seconds", 10, "pacing period in seconds")
	size := flag.Int("size", 1024, "bytes per record value (at least 9)")
	lingerMs := flag.Float64("linger-ms", 5, "producer linger in ms (librdkafka's and the Python test's default)")
	acks := flag.Int("acks", 1, "required acks: 0, 1 or -1 (all)")
	timeout := flag.Float64("timeout", 0, "give up this many seconds after start (default: seconds + 60)")
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	flag.Parse()
	// One P by default: the client mostly waits on sockets and its 1 ms tick, and with a second,
	// idle P the scheduler spins looking for work on every wake-up. Measured at 10k records/s:
	// ~25% less CPU, no worse latency (the client must leave the 2 cores to the broker).
	runtime.GOMAXPROCS(*procs)
	if *topic == "" || *size < 9 || *rate <= 0 || *partitions <= 0 {
		fail("need -topic, -size >= 9, -rate > 0 and -partitions > 0")
	}
	if *timeout <= 0 {
		*timeout = *seconds + 60
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout*float64(time.Second)))
	defer cancel()
	seeds := strings.Split(*bootstrap, ",")
	total := int(float64(*rate) * *seconds)

	// Consumer: every partition from its start offset, no group; librdkafka's fetch defaults
	// (fetch.min.bytes=1, fetch.wait.max.ms=500) as the Python consumer uses.
	offsets := map[int32]kgo.Offset{}
	for p := range *partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: offsets}),
		kgo.FetchMinBytes(1), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		fail("consumer: %v", err)
	}
	defer cons.Close()

	// Producer: librdkafka's defaults (no compression, no idempotence) with -acks and -linger-ms;
	// up to 5 produce requests in flight (the Java client's default; franz-go's is 1 without
	// idempotence, which would queue each request behind the previous one's round trip).
	var required kgo.Acks
	switch *acks {
	case -1:
		required = kgo.AllISRAcks()
	case 0:
		required = kgo.NoAck()
	case 1:
		required = kgo.LeaderAck()
	default:
		fail("-acks must be 0, 1 or -1")
	}
	popts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(*topic), kgo.RequiredAcks(required),
		kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5),
		kgo.ProducerLinger(time.Duration(*lingerMs * float64(time.Millisecond))),
		kgo.ProducerBatchCompression(kgo.NoCompression())}
	prod, err := kgo.NewClient(popts...)
	if err != nil {
		fail("producer: %v", err)
	}
	defer prod.Close()

	// The consumer runs in its own goroutine; `first` closes when it has seen any record (the
	// warm-up one), `done` when it has all `total` timed records or the deadline passed.
	first, done := make(chan struct{}), make(chan struct{})
	lat := make([]int64, 0, total)
	go func() {
		defer close(done)
		seen := false
		for len(lat) < total {
			fetches := cons.PollFetches(ctx)
			now := time.Now().UnixNano() // the hand-over time of every record of this poll
			if ctx.Err() != nil || fetches.IsClientClosed() {
				return
			}
			fetches.EachError(func(t string, p int32, err error) {
				fmt.Fprintf(os.Stderr, "latency_client: fetch %s[%d]: %v\n", t, p, err)
			})
			fetches.EachRecord(func(r *kgo.Record) {
				if !seen {
					seen = true
					close(first)
				}
				if len(r.Value) >= 9 && r.Value[0] == 'L' {
					lat = append(lat, now-int64(binary.BigEndian.Uint64(r.Value[1:9])))
				}
			})
		}
	}()

	// Warm-up: one record (not 'L', so not timed) acknowledged and received before pacing starts,
	// so neither client's connection and metadata set-up is measured.
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		fail("warm-up produce: %v", err)
	}
	select {
	case <-first:
	case <-ctx.Done():
		fail("the consumer did not receive the warm-up record within -timeout")
	}

	var mu sync.Mutex
	acked := make([]int64, 0, total)
	produceErrors := 0
	ackFn := func(r *kgo.Record, err error) {
		now := time.Now().UnixNano()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			produceErrors++
			return
		}
		acked = append(acked, now-int64(binary.BigEndian.Uint64(r.Value[1:9])))
	}

	// Pacing: every millisecond, produce the records due by then (an even rate, not bursts).
	pad := make([]byte, *size-9)
	for i := range pad {
		pad[i] = 'x'
	}
	tick := time.NewTicker(time.Millisecond)
	t0 := time.Now()
	sent := 0
	for sent < total && ctx.Err() == nil {
		due := min(total, int(time.Since(t0).Seconds()*float64(*rate))+1)
		for ; sent < due; sent++ {
			v := make([]byte, *size)
			v[0] = 'L'
			binary.BigEndian.PutUint64(v[1:9], uint64(time.Now().UnixNano()))
			copy(v[9:], pad)
			prod.Produce(ctx, &kgo.Record{Value: v}, ackFn)
		}
		if sent < total {
			<-tick.C
		}
	}
	tick.Stop()
	period := time.Since(t0).Seconds() // the pacing period; the final flush is not part of the rate
	if err := prod.Flush(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "latency_client: flush: %v\n", err)
	}
	<-done
	if len(lat) < sent {
		fmt.Fprintf(os.Stderr, "latency_client: received %d of %d records before the timeout\n", len(lat), sent)
	}

	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()

	mu.Lock()
	out := []field{{"sent", float64(sent)}, {"seconds", period}, {"received", float64(len(lat))}}
	out = append(out, percentiles(lat, "")...)
	out = append(out, percentiles(acked, "ack_")...)
	out = append(out, field{"produce_errors", float64(produceErrors)}, field{"client_cpu_s", cpu})
	mu.Unlock()
	fmt.Println(toJSON(out))
}

type field struct {
	key string
	val float64
}

// percentiles mirrors runner.py's _percentiles: skip the first 5% of samples (in arrival
// order), then p50/p99/p99.9 by index into the sorted rest, and the maximum, in ms.
func percentiles(samplesNs []int64, prefix string) []field {
	data := slices.Clone(samplesNs[len(samplesNs)/20:])
	slices.Sort(data)
	pct := func(q float64) float64 {
		if len(data) == 0 {
			return math.NaN()
		}
		return float64(data[min(len(data)-1, int(q*float64(len(data))))]) / 1e6
	}
	return []field{{prefix + "p50_ms", pct(0.5)}, {prefix + "p99_ms", pct(0.99)},
		{prefix + "p999_ms", pct(0.999)}, {prefix + "max_ms", pct(1)}}
}

// toJSON writes the fields in order; NaN is written as NaN, as Python's json.dumps does (and
// json.loads reads), which encoding/json refuses.
func toJSON(fields []field) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		v := "NaN"
		if !math.IsNaN(f.val) {
			v = strconv.FormatFloat(f.val, 'g', -1, 64)
		}
		parts[i] = strconv.Quote(f.key) + ": " + v
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "latency_client: "+format+"\n", args...)
	os.Exit(1)
}
