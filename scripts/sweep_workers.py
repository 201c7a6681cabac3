"""The worker loop the coverage sweeps share (scripts/hf_coverage.py,
scripts/model_zoo.py): each item's checks run in a subprocess of their own
(the sweep's `run_one`), `workers` at a time, with a progress line per item
and each record appended to a JSON-lines file as it completes, so a sweep cut
short keeps what it measured."""

import concurrent.futures
import json


def run_all(items, run_one, timeout, workers, describe, jsonl=None):
    """Runs run_one(item, timeout) for every item; returns the records in
    the order they completed. describe(record) -> (name, status) for the
    progress line."""
    records = []
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(run_one, item, timeout) for item in items]
        for i, future in enumerate(concurrent.futures.as_completed(futures), 1):
            record = future.result()
            records.append(record)
            name, status = describe(record)
            print(f"[{i}/{len(items)}] {name}: {status} ({record['seconds']} s)", flush=True)
            if jsonl:
                with open(jsonl, "a") as f:
                    f.write(json.dumps(record) + "\n")
    return records
