"""The Kafka binary protocol, sans-IO: frames, headers, API schemas and record batches.

Nothing in this package imports ``trio`` or ``socket``; callers feed bytes in and get
bytes (or buffer lists) out.
"""
