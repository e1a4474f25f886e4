"""Odradek as a member of a KRaft cluster: what clients are told about the cluster
(`metadata_cache`), per-partition leadership (`replica_manager`: Kafka's ReplicaManager and
Partition), forwarding to the controller (`forwarding`) and the broker role that ties them to
the metadata log (`broker_role`)."""
