"""The recorder tests' checks (test_record.py, test_train.py, test_embed.py):
a failed check prints `FAIL: ...` (ctest's FAIL_REGULAR_EXPRESSION) and is
counted; finish() prints the count or `NAME: all ok` (the PASS pattern) and
gives the exit status."""
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}")


def finish(name):
    if FAILURES:
        print(f"{len(FAILURES)} failures")
        return 1
    print(f"{name}: all ok")
    return 0
