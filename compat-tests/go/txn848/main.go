// Command txn848 runs franz-go's consume-transform-produce loop (a GroupTransactSession) as a
// member of a KIP-848 consumer group, the way franz-go's own TestTxnEtl does in its "848"
// subtests: every transaction commits the member's offsets with TxnOffsetCommit, carrying the
// member id and member epoch. Every fourth transaction is aborted and redone.
//
// It reads -records records from -in, writes "out-<value>" to -out for each, and prints one
// JSON line: what it did, how many requests of each kind it sent, and the first error (empty
// when none). It exits 1 on an error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// requestCounter counts the requests written per API key (a kgo.HookBrokerWrite).
type requestCounter struct {
	counts [128]atomic.Int64
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key >= 0 && int(key) < len(c.counts) {
		c.counts[key].Add(1)
	}
}

type summary struct {
	Consumed         int    `json:"consumed"`
	Committed        int    `json:"committed_transactions"`
	Aborted          int    `json:"aborted_transactions"`
	Heartbeats       int64  `json:"consumer_group_heartbeats"`
	Joins            int64  `json:"join_groups"`
	TxnOffsetCommits int64  `json:"txn_offset_commits"`
	Error            string `json:"error"`
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	in := flag.String("in", "", "topic to consume")
	out := flag.String("out", "", "topic to produce to")
	group := flag.String("group", "txn848", "consumer group")
	txnID := flag.String("transactional-id", "txn848", "transactional id")
	records := flag.Int("records", 0, "records to transform before stopping")
	timeout := flag.Duration("timeout", 90*time.Second, "give up after this long")
	debug := flag.Bool("debug", false, "log franz-go's debug messages to stderr")
	tv1 := flag.Bool("transactions-v1", false, "cap the versions that make franz-go use transactions V2 (KIP-890 part 2)")
	flag.Parse()

	var extra []kgo.Opt
	if *tv1 {
		// franz-go uses KIP-890 part 2 only if Produce v12, TxnOffsetCommit v5 and EndTxn v5 are
		// all allowed: below them it adds partitions and offsets with AddPartitionsToTxn and
		// AddOffsetsToTxn (transactions V1), whatever the broker's transaction.version.
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(0, 11) // Produce
		versions.SetMaxKeyVersion(26, 4) // EndTxn
		versions.SetMaxKeyVersion(28, 4) // TxnOffsetCommit
		extra = append(extra, kgo.MaxVersions(versions))
	}
	if *debug {
		extra = append(extra, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	s, err := run(strings.Split(*brokers, ","), *in, *out, *group, *txnID, *records, *timeout, extra...)
	if err != nil {
		s.Error = err.Error()
	}
	line, _ := json.Marshal(s)
	fmt.Println(string(line))
	if err != nil {
		os.Exit(1)
	}
}

func run(brokers []string, in, out, group, txnID string, records int, timeout time.Duration, extra ...kgo.Opt) (s summary, err error) {
	counter := &requestCounter{}
	// named results: the counts are filled in on every return
	defer func() {
		s.Heartbeats = counter.counts[68].Load() // ConsumerGroupHeartbeat
		s.Joins = counter.counts[11].Load()      // JoinGroup (the classic protocol)
		s.TxnOffsetCommits = counter.counts[28].Load()
	}()
	// franz-go v1.21 runs the KIP-848 protocol only when asked through this context value (its
	// tests' switch), with the range or sticky balancer.
	ctx848 := context.WithValue(context.Background(), "opt_in_kafka_next_gen_balancer_beta", true)
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.Dialer((&net.Dialer{Timeout: 10 * time.Second}).DialContext),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(60 * time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.UnknownTopicRetries(-1),
		kgo.WithContext(ctx848),
		kgo.WithHooks(counter),
	}
	session, err := kgo.NewGroupTransactSession(append(opts, extra...)...)
	if err != nil {
		return s, fmt.Errorf("creating the session: %w", err)
	}
	defer session.Close()

	deadline := time.Now().Add(timeout)
	transactions := 0
	for s.Consumed < records {
		if time.Now().After(deadline) {
			return s, fmt.Errorf("timed out after %d of %d records", s.Consumed, records)
		}
		pollCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fetches := session.PollRecords(pollCtx, 50) // several transactions, some aborted
		cancel()
		if errs := fetches.Errors(); len(errs) > 0 {
			if err := fetches.Err(); err != context.DeadlineExceeded && err != context.Canceled {
				return s, fmt.Errorf("poll: %v", errs)
			}
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := session.Begin(); err != nil {
			return s, fmt.Errorf("begin: %w", err)
		}
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			session.Produce(context.Background(), &kgo.Record{Topic: out, Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
		})
		transactions++
		abort := transactions%4 == 0
		try := kgo.TryCommit
		if abort {
			try = kgo.TryAbort
		}
		endCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		committed, err := session.End(endCtx, try)
		cancel()
		if err != nil {
			return s, fmt.Errorf("ending transaction %d: %w", transactions, err)
		}
		switch {
		case committed:
			s.Committed++
			s.Consumed += n
		case abort:
			s.Aborted++
		default:
			// the session aborted on its own (a rebalance): the records come again
		}
	}
	return s, nil
}
