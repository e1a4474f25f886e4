"""Command-line tools that work on files or talk to a broker (dump-log, ...)."""
