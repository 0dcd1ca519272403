"""The merge of a planned virtual sweep against the same sweep on one machine.

    python3 same_summary.py ONE.json MERGED.json RUNS

`experiment sweep --json` (one machine) and `experiment sweep merge DIR --json` print the summary's
top-level keys (schema, seeds, duration, profile, sets, oracle_duplicates_per_new, pollers) as the
same bytes; the merge adds its own keys after them. Checked byte for byte on the printed text, and
every run finished, none missing or failed.
"""

import json
import re
import sys

SUMMARY = ["schema", "seeds", "duration", "profile", "sets", "oracle_duplicates_per_new", "pollers"]


def top_level(text):
    """Each top-level key of a pretty-printed JSON object: the bytes of its lines."""
    keys = {}
    for m in re.finditer(r'^  "([a-z_0-9]+)": (.*?)(?=^  "|^\}$)', text, re.M | re.S):
        keys[m.group(1)] = m.group(2).rstrip().rstrip(",")
    return keys


one_text = open(sys.argv[1]).read()
merged_text = open(sys.argv[2]).read()
runs = int(sys.argv[3])
one, merged = top_level(one_text), top_level(merged_text)
for key in SUMMARY:
    if one.get(key) != merged.get(key):
        sys.exit(f"same_summary.py: '{key}' differs between the one-machine sweep and the merge")
v = json.loads(merged_text)
if v["plan"]["finished"] != runs or v["missing"] or v["failed"]:
    sys.exit(f"same_summary.py: {v['plan']['finished']} of {runs} runs finished: {v['missing']} {v['failed']}")
nodes = sorted({r["node"] for r in v["run_machines"]})
print(f"== merged summary of {runs} array tasks on {', '.join(nodes)} is the one-machine summary, byte for byte")
