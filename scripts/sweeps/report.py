"""A sweep's report (its ledger in docs/), which is also its record store:
--merge reads the rows of an earlier report back, so a later run adds to its
coverage. One cell format, written and read back; the tables every sweep's
report shares (totals per check, a row per item, the items that did not
build), laid out by its Ledger."""

import collections
import os
import re

from sweeps import child_process
from sweeps.outcomes import excluded

# Where the ledgers are written: the repository's docs/.
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs")

# A check's outcomes, the totals table's columns; a cell of another than "pass" names it before its detail.
OUTCOMES = ("pass", "wrong values", "missing op", "error")
PASS_IN_FLOAT64 = "pass (float64)"
_PROCESS_FAILURES = ("process died", "timed out after", "killed past the memory limit")


def format_cell(outcome, detail):
    """One check's (outcome, detail) as its report cell."""
    if outcome == "pass" and detail.startswith("in float64 ("):
        outcome, detail = PASS_IN_FLOAT64, detail[len("in float64 (") : -1]
    if outcome in ("pass", "-"):
        return outcome
    return f"{outcome}: {detail}".replace("|", "/").replace("\n", " ")[:160]


def parse_cell(cell):
    """A report cell back into (outcome, detail); None for "-" (a check that does not apply)."""
    if cell == "-":
        return None
    if cell == "pass":
        return ("pass", "")
    if cell.startswith(PASS_IN_FLOAT64 + ": "):
        return ("pass", f"in float64 ({cell[len(PASS_IN_FLOAT64) + 2 :]})")
    for o in OUTCOMES[1:]:
        if cell.startswith(o + ": "):
            return (o, cell[len(o) + 2 :])
    raise ValueError(f"unrecognized report cell {cell!r}")


def parse_check_cells(checks, cells):
    """A row's check cells back into {check: (outcome, detail)}. A process
    that died or timed out is one "process" result (the row repeats it in
    every cell)."""
    results = {}
    for check, cell in zip(checks, cells):
        parsed = parse_cell(cell)
        if parsed is None:
            continue
        if parsed[0] == "error" and parsed[1].startswith(_PROCESS_FAILURES):
            return {"process": parsed}
        results[check] = parsed
    return results


def report_rows(path, excluded_heading, header):
    """(section, cells) for each row of a report's tables: section "checks"
    before the line starting with `excluded_heading`, "excluded" after; rule
    rows and header rows (first cell `header`) left out."""
    section = "checks"
    with open(path) as f:
        for line in f:
            if line.startswith(excluded_heading):
                section = "excluded"
            if not line.startswith("| ") or line.startswith("| ---"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] != header:
                yield section, cells


def optimization_note(merged):
    """The report's sentence on how its programs were compiled."""
    level = re.search(r"xla_backend_optimization_level=(\d+)", child_process.child_env()["XLA_FLAGS"]).group(1)
    flag = f"XLA:CPU's LLVM optimization level {level} (`--xla_backend_optimization_level`)"
    if merged:
        return f"The last batch's programs were compiled at {flag}; earlier batches may have run at the default, 2."
    return f"Programs compiled at {flag}."


class Ledger:
    """Where a sweep's report keeps each record's fields: the checks table has
    a row per built item, `columns` ([(header, record field)]) then a cell
    per check of `checks` and the item's seconds; under `excluded_heading`,
    the items that did not build have a row of `excluded_columns` and why
    (its outcome `not_built`). The excluded table's fields are the record's
    key (which item it is), `name` the field a progress line names it by;
    `items` is what the report calls its items ("models")."""

    def __init__(self, checks, columns, excluded_heading, excluded_columns, not_built, name, items):
        self.checks = checks
        self.columns = columns
        self.excluded_heading = excluded_heading
        self.excluded_columns = excluded_columns
        self.not_built = not_built
        self.name = name
        self.items = items

    def key(self, record):
        return tuple(record[field] for _, field in self.excluded_columns)

    def _record(self, fields, seconds, results):
        record = dict.fromkeys((field for _, field in self.columns + self.excluded_columns), "")
        return {**record, **dict(fields), "seconds": seconds, "results": results}

    def read(self, path):
        """The records a report was written from, as far as its tables keep
        them (details as shortened there): what --merge starts from."""
        records, fields = [], [field for _, field in self.columns]
        for section, cells in report_rows(path, self.excluded_heading, self.columns[0][0]):
            if section == "excluded" and len(cells) == len(self.excluded_columns) + 1:
                *values, why = cells
                excluded_fields = [field for _, field in self.excluded_columns]
                records.append(self._record(zip(excluded_fields, values), 0.0, {"build": (self.not_built, why)}))
            elif section == "checks" and len(cells) == len(fields) + len(self.checks) + 1:
                values, checks, seconds = cells[: len(fields)], cells[len(fields) : -1], cells[-1]
                records.append(
                    self._record(zip(fields, values), float(seconds), parse_check_cells(self.checks, checks))
                )
        return records

    def merge(self, earlier, later):
        """earlier's records with later's in place of those of the same items."""
        merged = {self.key(r): r for r in earlier}
        merged.update({self.key(r): r for r in later})
        return list(merged.values())

    def totals(self, built):
        """The table of outcomes per check over the built records, and the missing ops they stop at."""
        per_check = collections.Counter()
        for r in built:
            for check, (o, _) in r["results"].items():
                per_check[(check, o)] += 1
        lines = ["", "| check | " + " | ".join(OUTCOMES) + " |", "|" + " --- |" * (1 + len(OUTCOMES))]
        for check in ("process",) + self.checks:
            counts = [per_check[(check, o)] for o in OUTCOMES]
            if any(counts):
                lines.append(f"| {check} | " + " | ".join(map(str, counts)) + " |")
        missing = collections.Counter(
            d for r in built for o, d in r["results"].values() if o == "missing op"
        ).most_common()
        if missing:
            stops = ", ".join(f"`{op}` {n}" for op, n in missing)
            lines += ["", f"Missing ops ({self.items} that stop at each): " + stops]
        return lines

    def tables(self, records):
        """The checks table (the built records, in order) and the table of those that did not build."""
        headers = [header for header, _ in self.columns] + list(self.checks) + ["seconds"]
        lines = ["", "| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
        for r in records:
            if not excluded(r):
                cells = [r[field] for _, field in self.columns]
                cells += [
                    format_cell(*r["results"].get(c, r["results"].get("process", ("-", "")))) for c in self.checks
                ]
                lines.append("| " + " | ".join(map(str, cells + [r["seconds"]])) + " |")
        headers = [header for header, _ in self.excluded_columns] + ["why"]
        lines += ["", self.excluded_heading, "", "| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
        for r in records:
            if excluded(r):
                why = r["results"]["build"][1].replace("|", "/")[:200]
                lines.append("| " + " | ".join([r[field] for _, field in self.excluded_columns] + [why]) + " |")
        return lines


def write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
