#!/bin/sh
# Fills the shared example configs with this deployment's addresses (the same
# templates scripts/up fills with local ports), then runs the given command.
#   DB1_PORT, DB2_PORT, KAFKA_BROKERS, WEBHOOK_URL, DB1_HOST, DB2_HOST
set -eu
mkdir -p /run/cellar
sed -e "s/@DB1_PORT@/${DB1_PORT:-3306}/" -e "s/@DB2_PORT@/${DB2_PORT:-3306}/" \
    -e "s/@KAFKA_BROKERS@/${KAFKA_BROKERS:-kafka:9092}/" \
    -e "0,/address: 127.0.0.1/s//address: ${DB1_HOST:-db1}/" \
    -e "0,/address: 127.0.0.1/s//address: ${DB2_HOST:-db2}/" \
    /etc/cellar/examples/cellar.yaml > /run/cellar/cellar.yaml
sed -e "s#@WEBHOOK_URL@#${WEBHOOK_URL:-http://webhook-sink:8090}#" \
    /etc/cellar/examples/triggers.yaml > /run/cellar/triggers.yaml
exec "$@"
