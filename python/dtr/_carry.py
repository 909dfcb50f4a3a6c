"""The libraries the package carries for libdtr_gloo.so (Gloo and what Gloo loads: setup.py
lists them in carried.txt), loaded before it so that the loader finds them by name. A
library's own needs are looked for along its own RUNPATH, which Debian's builds of these do
not have, so a carried libgloo.so.0 would not find a carried libhiredis; loaded here first,
each is already in the process when the next one asks for it. Each is loaded where its own
needs are (in rounds, whatever carried.txt's order); one that will not load is left to the
loader's search, as before it was carried. Not part of the API."""
import ctypes
import os

_loaded = []  # (kept: a handle dropped would not unload them, but this says what loaded)


def load():
    here = os.path.dirname(os.path.abspath(__file__))
    listed = os.path.join(here, "carried.txt")
    if not os.path.exists(listed):
        return
    left = [n for n in open(listed).read().split() if os.path.exists(os.path.join(here, n))]
    while left:
        missed = []
        for name in left:
            try:
                _loaded.append(ctypes.CDLL(os.path.join(here, name)))
            except OSError:
                missed.append(name)
        if len(missed) == len(left):
            return
        left = missed
