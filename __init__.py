"""Odradek: a Kafka broker written in Python.

Stock Kafka clients talk to it unmodified, and the files it writes are byte-for-byte
what Apache Kafka writes. Subpackages: ``wire`` (the binary protocol, sans-IO),
``logstore`` (Kafka's log dir), ``handlers`` (one module per API family).
"""

__version__ = "0.1.0"
