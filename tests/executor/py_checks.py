"""What the Python binding's tests share: `check` (records a failed expectation and goes on; the test exits 1 at
its end when `failures` is not empty) and `on_threads` (runs fn(rank) on one thread per communicator, as a group of
local communicators needs, and returns each rank's exception or None)."""

import sys
import threading

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


def on_threads(comms, fn):
    errors = [None] * len(comms)

    def body(r):
        try:
            fn(r)
        except Exception as e:  # noqa: BLE001 - reported per rank
            errors[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
