"""Log levels per logger and a structured (JSON lines) log format, set from broker configs.

Kafka sets levels per log4j category (``log4j.logger.kafka.request.logger=DEBUG``); Odradek's
loggers are its module names, so the same idea is one config key:

* ``odradek.log.levels=odradek.handlers=DEBUG,odradek.logstore=WARN`` -- ``logger=LEVEL`` pairs,
  comma-separated; a logger's level applies to everything below it (``odradek.handlers.fetch``).
  Levels: TRACE (= DEBUG), DEBUG, INFO, WARN, ERROR, FATAL (= CRITICAL), OFF.
* ``odradek.log.format=json`` -- one JSON object per line (``ts``, ``level``, ``logger``,
  ``message``, ``thread`` and ``exception`` when there is one) for log shippers; the default
  ``text`` keeps Kafka's ``[time] LEVEL message (logger)`` layout.

The root level stays the ``--log-level`` option of the ``odradek`` command.
"""

from __future__ import annotations

import datetime
import json
import logging

from .config import BROKER_CONFIGS, BrokerConfig, ConfigError, ConfigKey

_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}


def parse_levels(text: str) -> dict[str, int]:
    """``a.b=DEBUG,c=WARN`` -> {"a.b": DEBUG, "c": WARNING}; an unknown level is a ValueError."""
    out: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, level = item.partition("=")
        if not sep or level.strip().upper() not in _LEVELS:
            raise ValueError(f"expected logger=LEVEL with LEVEL one of {', '.join(_LEVELS)}, got {item!r}")
        out[name.strip()] = _LEVELS[level.strip().upper()]
    return out


def _format(text: str) -> str:
    value = text.strip().lower()
    if value not in ("text", "json"):
        raise ValueError(f"expected text or json, got {text!r}")
    return value


LOGGING_CONFIGS = {
    "odradek.log.levels": ConfigKey(
        "odradek.log.levels", parse_levels, {},
        "Per-logger levels, like log4j categories: logger=LEVEL pairs, comma-separated "
        "(e.g. odradek.handlers=DEBUG,odradek.logstore=WARN).", "LIST",
    ),
    "odradek.log.format": ConfigKey(
        "odradek.log.format", _format, "text",
        "Log line format: text (Kafka's [time] LEVEL message (logger)) or json (one object per line).",
        "STRING",
    ),
}
# Registered with the broker's known keys so server.properties and --override accept them.
for _key, _spec in LOGGING_CONFIGS.items():
    BROKER_CONFIGS.setdefault(_key, _spec)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: easy to ship to Loki, Elasticsearch or CloudWatch."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "thread": record.threadName,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def apply_logging(config: BrokerConfig) -> None:
    """Apply odradek.log.levels and odradek.log.format to the already configured root logger."""
    try:
        levels = config.get("odradek.log.levels")
        fmt = config.get("odradek.log.format")
    except KeyError as exc:  # pragma: no cover - the keys are registered above
        raise ConfigError(str(exc)) from None
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    if fmt == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())
