"""kafka-python (a pure-Python implementation of the Kafka protocol, no
librdkafka underneath) for tests/other_clients_test.cc. Run with the venv's
python (scripts/install-deps, tests/requirements.txt).

  other_clients_kafka_python.py consume BOOTSTRAP TOPIC PARTITIONS TIMEOUT_S
      Assigns partitions 0..PARTITIONS-1 from offset 0 with
      isolation_level='read_committed' (no consumer group) and reads until
      every partition's position reached its end offset (the last stable
      offset, read_committed) or TIMEOUT_S passed. Prints one JSON line per
      record on stdout, {"partition", "offset", "key", "headers": [[name,
      value], ...], "value"} (tests/cloudevents_consumer.py --check reads
      them), and exits 1 when the end was not reached.

  other_clients_kafka_python.py abort BOOTSTRAP TOPIC PARTITIONS
      Writes one decoy record to each partition in a transaction and aborts
      it: records a read_committed consumer must never show.
"""
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def text(raw):
    return raw.decode() if raw is not None else None


def consume(bootstrap, topic, partitions, timeout_s):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, isolation_level="read_committed")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    end = consumer.end_offsets(tps)
    deadline = time.monotonic() + timeout_s
    while any(consumer.position(tp) < end[tp] for tp in tps):
        if time.monotonic() > deadline:
            print("kafka-python: positions %s short of end offsets %s after %.0f s" %
                  ({tp.partition: consumer.position(tp) for tp in tps},
                   {tp.partition: end[tp] for tp in tps}, timeout_s), file=sys.stderr)
            consumer.close()
            return 1
        for tp, records in consumer.poll(timeout_ms=200).items():
            for r in records:
                print(json.dumps({"partition": r.partition, "offset": r.offset,
                                  "key": text(r.key),
                                  "headers": [[n, text(v)] for n, v in r.headers or []],
                                  "value": text(r.value)}))
    print("kafka-python: end offsets %s" % {tp.partition: end[tp] for tp in tps}, file=sys.stderr)
    consumer.close()
    return 0


def abort(bootstrap, topic, partitions):
    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             transactional_id="other-clients-decoy-" + topic)
    producer.init_transactions()
    producer.begin_transaction()
    for p in range(partitions):
        producer.send(topic, partition=p, key=b"decoy", value=b'{"decoy": "aborted"}',
                      headers=[("ce_specversion", b"1.0")])
    producer.flush()
    producer.abort_transaction()
    producer.close()
    return 0


def main(argv):
    if len(argv) == 5 and argv[0] == "consume":
        return consume(argv[1], argv[2], int(argv[3]), float(argv[4]))
    if len(argv) == 4 and argv[0] == "abort":
        return abort(argv[1], argv[2], int(argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
