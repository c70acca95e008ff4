#!/usr/bin/python3
"""Reads a Cellar change-log topic with a plain Kafka client (Debian's
python3-confluent-kafka: no Cellar code) and checks every record against the
CloudEvents Kafka protocol binding (binary content mode, spec v1.0) as Cellar
documents it (changelog/cell_event.h, README "Change log"):

  key == row_key of the value; ce_specversion 1.0; ce_id
  <datastore>:<shard>:<added_id>; ce_source cellar://<topic_prefix>/<datastore>;
  ce_type cellar.cell.written, or cellar.cell.erased for tombstones; ce_time the
  value's created_at, RFC 3339 UTC with microseconds; ce_subject
  <row_key>/<column>/<ref_key>; content-type application/json; and per row
  and column, ref_keys arrive in increasing order (first occurrences: the
  relay is at least once).

Usage: cloudevents_consumer.py BOOTSTRAP TOPIC TOPIC_PREFIX PARTITIONS EXPECTED [TIMEOUT_S]
Reads from the beginning of every partition (read_committed) until EXPECTED
distinct ce_id values arrived or TIMEOUT_S (default 30) passed, then prints
one JSON object on stdout: {"records", "distinct", "written", "erased",
"errors": [...]}. Exit code 0 when nothing was wrong and EXPECTED arrived.
"""
import json
import re
import sys
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def main():
    bootstrap, topic, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    partitions, expected = int(sys.argv[4]), int(sys.argv[5])
    timeout_s = float(sys.argv[6]) if len(sys.argv) > 6 else 30.0
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "cloudevents-check",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "log_level": 3,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    errors, ids = [], set()
    records = written = erased = 0
    last_ref = {}  # (row_key, column) -> highest ref_key seen so far
    deadline = time.monotonic() + timeout_s
    while len(ids) < expected and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                errors.append("consume: %s" % m.error())
            continue
        records += 1
        where = "%s/%d@%d" % (m.topic(), m.partition(), m.offset())
        value = json.loads(m.value())
        headers = {}
        for name, raw in m.headers() or []:
            headers[name] = raw.decode() if raw is not None else None

        def expect(name, want):
            if headers.get(name) != want:
                errors.append("%s: header %s is %r, want %r" % (where, name, headers.get(name), want))

        key = m.key().decode() if m.key() is not None else None
        if key != value["row_key"]:
            errors.append("%s: key %r != row_key %r" % (where, key, value["row_key"]))
        ds = value["datastore"]
        ce_id = "%s:%d:%d" % (ds, value["shard"], value["added_id"])
        expect("ce_specversion", "1.0")
        expect("ce_id", ce_id)
        expect("ce_source", "cellar://%s/%s" % (prefix, ds))
        expect("ce_type", "cellar.cell.erased" if value["tombstone"] else "cellar.cell.written")
        expect("ce_time", value["created_at"])
        if not TIME_RE.match(headers.get("ce_time") or ""):
            errors.append("%s: ce_time %r is not RFC 3339 UTC with microseconds" %
                          (where, headers.get("ce_time")))
        expect("ce_subject", "%s/%s/%d" % (value["row_key"], value["column"], value["ref_key"]))
        expect("content-type", "application/json")
        if ce_id in ids:
            continue  # a repeat (at least once): order is judged on first occurrences
        ids.add(ce_id)
        if value["tombstone"]:
            erased += 1
        else:
            written += 1
        row = (value["row_key"], value["column"])
        if row in last_ref and value["ref_key"] <= last_ref[row]:
            errors.append("%s: row %s column %s: ref_key %d after %d" %
                          (where, row[0], row[1], value["ref_key"], last_ref[row]))
        last_ref[row] = max(last_ref.get(row, -1), value["ref_key"])
    consumer.close()
    if len(ids) < expected:
        errors.append("only %d of %d events arrived within %.0f s" % (len(ids), expected, timeout_s))
    print(json.dumps({"records": records, "distinct": len(ids), "written": written,
                      "erased": erased, "errors": errors[:20]}))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
