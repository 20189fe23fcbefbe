"""edit_db.py IN OUT STATEMENT: runs the Python STATEMENT on the tuning
database `d` (and `entry(family, batch=1)`, which finds an entry), then
writes it to OUT."""
import json
import sys

d = json.load(open(sys.argv[1]))


def entry(family, batch=1):
    for e in d["entries"]:
        if e["key"]["family"] == family and e["key"]["batch"] == batch:
            return e
    raise KeyError(family)


exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"), indent=1)
