"""What the examples share: the package from this checkout (unless it is installed) and the
sidecar's address on the command line."""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def parser(doc):
    """An argument parser with --url (the sidecar) and --topic."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--url", required=True, help="the sidecar, e.g. $SHOAL_URL")
    ap.add_argument("--topic", default=os.environ.get("SHOAL_TOPIC", "orders"))
    return ap
