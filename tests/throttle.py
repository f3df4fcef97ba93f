#!/usr/bin/env python3
"""Copy stdin to stdout at RATE bytes a second: a slow link, so that a
receiver can be killed in the middle of a stream."""
import sys
import time

rate = float(sys.argv[1])
src, dst = sys.stdin.buffer, sys.stdout.buffer
try:
    while True:
        chunk = src.read(65536)
        if not chunk:
            break
        dst.write(chunk)
        dst.flush()
        time.sleep(len(chunk) / rate)
except BrokenPipeError:
    pass
