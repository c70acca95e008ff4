#!/usr/bin/python3
"""Checks the records of a Cellar change-log topic as any Kafka client sees
them, against the CloudEvents Kafka protocol binding (binary content mode,
spec v1.0) as Cellar documents it (changelog/cell_event.h, docs/design.md "Change
log"). The rules live here once (CloudEventsChecker) and serve two modes:

  key == row_key of the value; ce_specversion 1.0; ce_id
  <datastore>:<shard>:<added_id>; ce_source cellar://<topic_prefix>/<datastore>;
  ce_type cellar.cell.written, or cellar.cell.erased for tombstones; ce_time the
  value's created_at, RFC 3339 UTC with microseconds; ce_subject
  <row_key>/<column>/<ref_key>; content-type application/json; each header
  once; and per row and column, ref_keys arrive in increasing order (first
  occurrences: the relay is at least once). With --partitions, a record is in
  partition shard % partitions; per partition, offsets increase.

1. Reading the topic itself with a plain Kafka client (Debian's
   python3-confluent-kafka: no Cellar code), as changelog_kafka_test does:

   cloudevents_consumer.py BOOTSTRAP TOPIC TOPIC_PREFIX PARTITIONS EXPECTED [TIMEOUT_S]

   Reads from the beginning of every partition (read_committed) until
   EXPECTED distinct ce_id values arrived or TIMEOUT_S (default 30) passed.

2. Checking what another client read (tests/other_clients_test.cc):

   cloudevents_consumer.py --check --topic-prefix PREFIX --expected N
       [--partitions P] [--exactly-once] [--format jsonl|console|kcat] [FILE]

   Reads the records from FILE (default stdin). jsonl: one JSON object per
   line, {"partition", "offset", "key", "headers": [[name, value], ...],
   "value"} (key, header values and value as text, null when absent).
   console: the output of Kafka's ConsoleConsumer (DefaultMessageFormatter)
   with print.partition, print.offset, print.headers, print.key and
   print.value, tab as key.separator and "," as headers.separator. kcat: the
   output of kcat -f '%p\\t%o\\t%k\\t%h\\t%s\\n'. --exactly-once: a repeated
   ce_id is an error.

Both print one JSON object on stdout: {"records", "distinct", "written",
"erased", "duplicates", "errors": [...]}, and exit 0 when nothing was wrong
and EXPECTED distinct events arrived.
"""
import argparse
import json
import re
import sys
import time

TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
CELL_FIELDS = ("datastore", "shard", "added_id", "row_key", "column", "ref_key", "created_at",
               "tombstone")


class CloudEventsChecker:
    """The rules above, applied to one record at a time (add), then summed up
    (summary)."""

    def __init__(self, topic_prefix, partitions=None, exactly_once=False):
        self.prefix = topic_prefix
        self.partitions = partitions
        self.exactly_once = exactly_once
        self.errors = []
        self.ids = set()
        self.records = self.written = self.erased = self.duplicates = 0
        self.last_ref = {}  # (row_key, column) -> highest ref_key seen so far
        self.last_offset = {}  # partition -> last offset seen

    @property
    def distinct(self):
        return len(self.ids)

    def add(self, partition, offset, key, headers, value):
        """One record: key and value text or None, headers a list of (name,
        text or None) pairs."""
        self.records += 1
        where = "%s@%s" % (partition, offset)
        if partition in self.last_offset and offset <= self.last_offset[partition]:
            self.errors.append("%s: offset after %d in the same partition" %
                               (where, self.last_offset[partition]))
        self.last_offset[partition] = offset
        try:
            value = json.loads(value)
            missing = [f for f in CELL_FIELDS if f not in value]
        except (TypeError, ValueError, AttributeError):
            value, missing = None, list(CELL_FIELDS)
        if not isinstance(value, dict) or missing:
            self.errors.append("%s: value is not a cell event (missing %s): %r" %
                               (where, ",".join(missing), value))
            return
        named = {}
        for name, text in headers:
            if name in named:
                self.errors.append("%s: header %s appears more than once" % (where, name))
            named[name] = text

        def expect(name, want):
            if named.get(name) != want:
                self.errors.append("%s: header %s is %r, want %r" %
                                   (where, name, named.get(name), want))

        if key != value["row_key"]:
            self.errors.append("%s: key %r != row_key %r" % (where, key, value["row_key"]))
        ds = value["datastore"]
        ce_id = "%s:%d:%d" % (ds, value["shard"], value["added_id"])
        expect("ce_specversion", "1.0")
        expect("ce_id", ce_id)
        expect("ce_source", "cellar://%s/%s" % (self.prefix, ds))
        expect("ce_type", "cellar.cell.erased" if value["tombstone"] else "cellar.cell.written")
        expect("ce_time", value["created_at"])
        if not TIME_RE.match(named.get("ce_time") or ""):
            self.errors.append("%s: ce_time %r is not RFC 3339 UTC with microseconds" %
                               (where, named.get("ce_time")))
        expect("ce_subject", "%s/%s/%d" % (value["row_key"], value["column"], value["ref_key"]))
        expect("content-type", "application/json")
        if self.partitions is not None and partition != value["shard"] % self.partitions:
            self.errors.append("%s: shard %d belongs in partition %d" %
                               (where, value["shard"], value["shard"] % self.partitions))
        if ce_id in self.ids:
            self.duplicates += 1
            if self.exactly_once:
                self.errors.append("%s: %s arrived again" % (where, ce_id))
            return  # a repeat (at least once): order is judged on first occurrences
        self.ids.add(ce_id)
        if value["tombstone"]:
            self.erased += 1
        else:
            self.written += 1
        row = (value["row_key"], value["column"])
        if row in self.last_ref and value["ref_key"] <= self.last_ref[row]:
            self.errors.append("%s: row %s column %s: ref_key %d after %d" %
                               (where, row[0], row[1], value["ref_key"], self.last_ref[row]))
        self.last_ref[row] = max(self.last_ref.get(row, -1), value["ref_key"])

    def summary(self, expected, within=""):
        errors = list(self.errors)
        if self.distinct < expected:
            errors.append("only %d of %d events arrived%s" % (self.distinct, expected, within))
        return {"records": self.records, "distinct": self.distinct, "written": self.written,
                "erased": self.erased, "duplicates": self.duplicates, "errors": errors[:20]}


# Parsers: one client's output -> (partition, offset, key, headers, value).

def parse_jsonl(line):
    r = json.loads(line)
    return (r["partition"], r["offset"], r["key"], [tuple(h) for h in r["headers"] or []],
            r["value"])


def parse_console(line):
    # Partition:P <tab> Offset:O <tab> n:v,n:v|NO_HEADERS <tab> key <tab> value
    partition, offset, headers, key, value = line.split("\t", 4)
    if not partition.startswith("Partition:") or not offset.startswith("Offset:"):
        raise ValueError("no Partition:/Offset: columns")
    pairs = []
    if headers != "NO_HEADERS":
        for h in headers.split(","):
            name, _, text = h.partition(":")
            pairs.append((name, None if text == "null" else text))
    return (int(partition[len("Partition:"):]), int(offset[len("Offset:"):]),
            None if key == "null" else key, pairs, None if value == "null" else value)


def parse_kcat(line):
    # P <tab> O <tab> key <tab> n=v,n=v <tab> value
    partition, offset, key, headers, value = line.split("\t", 4)
    pairs = [tuple(h.split("=", 1)) if "=" in h else (h, None)
             for h in headers.split(",")] if headers else []
    return int(partition), int(offset), key, pairs, value


PARSERS = {"jsonl": parse_jsonl, "console": parse_console, "kcat": parse_kcat}


def check_main(argv):
    p = argparse.ArgumentParser(description="Checks records another Kafka client read.")
    p.add_argument("--check", action="store_true", required=True)
    p.add_argument("--topic-prefix", required=True)
    p.add_argument("--expected", type=int, required=True)
    p.add_argument("--partitions", type=int)
    p.add_argument("--exactly-once", action="store_true")
    p.add_argument("--format", choices=sorted(PARSERS), default="jsonl")
    p.add_argument("file", nargs="?")
    args = p.parse_args(argv)
    checker = CloudEventsChecker(args.topic_prefix, args.partitions, args.exactly_once)
    parse = PARSERS[args.format]
    stream = open(args.file, encoding="utf-8") if args.file else sys.stdin
    with stream:
        for n, line in enumerate(stream, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            try:
                record = parse(line)
            except (ValueError, KeyError, TypeError) as e:
                checker.errors.append("line %d is not a %s record (%s): %r" %
                                      (n, args.format, e, line[:200]))
                continue
            checker.add(*record)
    summary = checker.summary(args.expected)
    print(json.dumps(summary))
    return 0 if not summary["errors"] else 1


def consume_main(argv):
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    bootstrap, topic, prefix = argv[0], argv[1], argv[2]
    partitions, expected = int(argv[3]), int(argv[4])
    timeout_s = float(argv[5]) if len(argv) > 5 else 30.0
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "cloudevents-check",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "log_level": 3,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    checker = CloudEventsChecker(prefix)
    deadline = time.monotonic() + timeout_s
    while checker.distinct < expected and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                checker.errors.append("consume: %s" % m.error())
            continue

        def text(raw):
            return raw.decode() if raw is not None else None

        checker.add("%s/%d" % (m.topic(), m.partition()), m.offset(), text(m.key()),
                    [(name, text(raw)) for name, raw in m.headers() or []], text(m.value()))
    consumer.close()
    summary = checker.summary(expected, " within %.0f s" % timeout_s)
    print(json.dumps(summary))
    return 0 if not summary["errors"] else 1


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        sys.exit(check_main(sys.argv[1:]))
    sys.exit(consume_main(sys.argv[1:]))
