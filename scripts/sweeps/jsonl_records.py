"""A sweep's records as JSON lines (--jsonl): appended one by one as items
complete, so a sweep cut short keeps what it measured, and read back by
--from-jsonl."""

import json


def append(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def read(path, key):
    """The records appended to `path`, the last one per key(record) winning
    (a rerun with --only appends)."""
    latest = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                latest[key(record)] = record
    return list(latest.values())
