"""Kafka's log: log dirs, partitions, segments, indexes, snapshots, checkpoints, recovery."""
