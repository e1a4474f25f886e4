"""Kafka's KRaft metadata log (`__cluster_metadata-0`) as Odradek's metadata store.

* :mod:`.records` – metadata record values (ApiMessageAndVersion framing) and control records;
* :mod:`.snapshot` / :mod:`.bootstrap` – snapshot files and `bootstrap.checkpoint`;
* :mod:`.quorum_state` – the `quorum-state` file;
* :mod:`.log` – the metadata partition log (replay, leader appends);
* :mod:`.image` – the state a replay builds;
* :mod:`.store` – the broker's metadata store tying these together;
* :mod:`.storage_tool` – `odradek storage format | info | random-uuid`.
"""
