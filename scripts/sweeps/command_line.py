"""The command line the model sweeps share (model_zoo, hf_coverage): their
arguments, and what main does with them once read: run the items (or read
--from-jsonl's records), merge with the earlier report, write the report."""

import argparse
import os
import time

from sweeps import child_process, jsonl_records
from sweeps.outcomes import status


def arguments(description, items, report, workers, timeout, only, timeout_help=None):
    """The arguments every model sweep takes; `items` names them ("models"), `only` says what --only lists."""
    parser = argparse.ArgumentParser(description=description)
    one = items[:-1]
    parser.add_argument("--workers", type=int, default=workers)
    parser.add_argument("--timeout", type=int, default=timeout, help=timeout_help or f"seconds per {one}")
    parser.add_argument("--only", default="", help=f"comma-separated {only}")
    parser.add_argument("--limit", type=int, default=0, help=f"the first N {items} only")
    parser.add_argument("--next", type=int, default=0, help=f"the first N {items} the report does not list")
    parser.add_argument("--merge", action="store_true", help=f"keep the report's other {items}' rows")
    parser.add_argument("--report", default=report)
    parser.add_argument("--jsonl", default="", help=f"also append each {one}'s record to this file")
    parser.add_argument("--from-jsonl", default="", help="write the report from these records, running nothing")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    return parser


def only(args):
    """--only's names, or None for every item."""
    return set(args.only.split(",")) if args.only else None


def select(items, earlier, item_key, record_key, next_count=None, limit=None):
    """The items a run sweeps: with `next_count`, the first that many whose
    item_key(item) no earlier record's record_key(record) lists; with
    `limit`, the first `limit` of those."""
    if next_count:
        listed = {record_key(r) for r in earlier}
        items = [i for i in items if item_key(i) not in listed][:next_count]
    return items[:limit] if limit else items


def run(args, ledger, items, item_key, run_one, write_report):
    """A sweep's main after its arguments: with --from-jsonl, the report from
    those records (a sweep cut short; joining the report's own with
    --merge); else every item of items() (with --next, the first N the report
    does not list) run by run_one(item, timeout), then the report, joining
    the earlier one's rows with --merge or --next. item_key(item) is
    ledger.key of its record; write_report(records, seconds, merged)."""
    if args.from_jsonl:
        records = jsonl_records.read(args.from_jsonl, ledger.key)
        seconds = sum(r["seconds"] for r in records)
        if args.merge:
            records = ledger.merge(ledger.read(args.report), records)
        write_report(records, seconds, args.merge)
    else:
        merged = bool(args.merge or args.next)
        earlier = ledger.read(args.report) if merged and os.path.exists(args.report) else []
        chosen = select(items(), earlier, item_key, ledger.key, args.next, args.limit)
        started = time.time()
        describe = lambda r: (r[ledger.name], status(r))  # noqa: E731
        records = child_process.run_all(chosen, run_one, args.timeout, args.workers, describe, args.jsonl)
        if merged:
            records = ledger.merge(earlier, records)
        write_report(records, time.time() - started, merged)
    print(f"report: {args.report}")
