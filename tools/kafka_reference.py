"""What a default single-node Kafka 4.4.0 (broker and controller in one process, formatted with
`kafka-storage format` defaults) answers to ApiVersions on its broker listener, and why Odradek
answers differently where it does.

Facts recorded from a live node (compat-tests/test_kafka44_reference.py checks them against one
and checks that every difference from Odradek has a reason here); docs/protocol.md is generated
from them (python -m odradek.tools.gen_docs).
"""

from __future__ import annotations

KAFKA_VERSION = "4.4.0"

#: api key -> (min, max) version Kafka 4.4.0 advertises.
API_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 5), 19: (2, 7), 20: (1, 6), 21: (0, 2),
    22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 6), 29: (1, 3), 30: (1, 3),
    31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5), 36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2),
    40: (1, 2), 41: (1, 3), 42: (0, 3), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1),
    49: (0, 1), 50: (0, 0), 51: (0, 0), 55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0),
    66: (0, 2), 68: (0, 1), 69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
    80: (0, 1), 81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1), 88: (0, 1), 89: (0, 1),
    90: (0, 1), 91: (0, 0), 92: (0, 0), 93: (0, 0), 94: (0, 0),
}

#: ApiVersions v4+ SupportedFeatures (name, min, max), in Kafka's order.
SUPPORTED_FEATURES: list[tuple[str, int, int]] = [
    ("group.version", 0, 1), ("kraft.version", 0, 1), ("metadata.version", 7, 33), ("share.version", 0, 2),
    ("streams.version", 0, 1), ("transaction.version", 0, 2), ("eligible.leader.replicas.version", 0, 1),
]

#: FinalizedFeatures (name, level) of a freshly formatted node, in Kafka's order.
FINALIZED_FEATURES: list[tuple[str, int]] = [
    ("group.version", 1), ("streams.version", 1), ("transaction.version", 2),
    ("eligible.leader.replicas.version", 1), ("share.version", 2), ("metadata.version", 33),
]

_OLD_VERSIONS = ("Odradek still serves the older versions Kafka 3.9 served, which Kafka 4.0 removed "
                 "(KIP-896), so that clients of those releases keep working")
_STREAMS = ("the topology description update (KIP-1331) is sent only when the coordinator asks for it; "
            "Odradek's never does (docs/streams-groups.md)")
_UNREGISTER_CONTROLLER = ("sent between the controllers of a multi-voter quorum; the Odradek controller is a "
                          "single voter (docs/cluster.md)")
_CONTROLLER_ONLY = ("served to brokers on a controller listener only, as Kafka's controller serves it "
                    "(docs/cluster.md); like Kafka's, a broker listener does not advertise it")
_TELEMETRY = ("Kafka advertises the KIP-714 telemetry APIs only when a telemetry exporter plugin is "
              "configured; Odradek's exporter is its Prometheus endpoint, so it always serves them "
              "(docs/metrics.md)")

#: api key -> why Odradek's served range differs from Kafka 4.4.0's.
DIFFERENCES: dict[int, str] = {
    8: _OLD_VERSIONS, 9: _OLD_VERSIONS, 29: _OLD_VERSIONS, 30: _OLD_VERSIONS, 31: _OLD_VERSIONS,
    32: _OLD_VERSIONS, 27: _OLD_VERSIONS,
    94: _UNREGISTER_CONTROLLER,
    56: _CONTROLLER_ONLY, 58: _CONTROLLER_ONLY, 59: _CONTROLLER_ONLY, 62: _CONTROLLER_ONLY,
    63: _CONTROLLER_ONLY, 67: _CONTROLLER_ONLY, 73: _CONTROLLER_ONLY,
    71: _TELEMETRY, 72: _TELEMETRY,
    88: _STREAMS, 89: _STREAMS, 93: _STREAMS,
}

#: Differences in the features part of ApiVersions, by feature or field.
FEATURE_DIFFERENCES: dict[str, str] = {
    "FinalizedFeaturesEpoch": "the offset of the last record in the metadata log, as in Kafka; the logs differ "
                              "(Odradek writes no controller registration and no NoOp records), so the numbers do",
}
