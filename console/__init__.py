"""`odradek console`: a web console for a Kafka cluster (Odradek or Apache Kafka).

A separate process from the broker: a small WSGI app (Flask, served by waitress) that talks
to the cluster only through the Kafka protocol, with the same client the command-line tools
use (:mod:`odradek.tools.client`). The front end is plain HTML, CSS and JavaScript in
``static/``, with no build step and nothing fetched from the internet. See docs/console.md.
"""
