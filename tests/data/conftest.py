"""Shared setup for the funcgrad.data tests.

Worker processes unpickle the helper datasets by module name, so this folder must be on
sys.path (pytest's default import mode puts it there; this makes it explicit for the others).
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
