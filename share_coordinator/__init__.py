"""Share groups' state (KIP-932): the share coordinator and its ``__share_group_state`` topic,
and the share-partitions that partition leaders keep for ShareFetch/ShareAcknowledge."""
