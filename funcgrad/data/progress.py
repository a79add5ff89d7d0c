"""A small progress bar for long loops, written to stderr.

It draws only when the stream is a terminal and the ``CI`` environment variable is unset (or
when forced with ``enable=True``), at most ten times a second.

Example:
    >>> from funcgrad.data import progress
    >>> total = 0
    >>> for x in progress(range(3), desc="sum"):
    ...     total += x
    >>> total
    3
"""
import os
import sys
import time

__all__ = ["progress"]

_WIDTH = 24


def _should_draw(stream, enable):
    if enable is not None:
        return bool(enable)
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):             # closed stream
        return False


def _clock(seconds):
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def format_bar(n, total, elapsed, desc=None, width=_WIDTH):
    """One line of the bar: label, percent, bar, count, elapsed<remaining, rate.

    Example:
        >>> from funcgrad.data.progress import format_bar
        >>> format_bar(5, 10, 2.0, desc="epoch 1")
        'epoch 1:  50%|############            | 5/10 [00:02<00:02, 2.50 it/s]'
    """
    rate = n / elapsed if elapsed > 0 else 0.0
    label = f"{desc}: " if desc else ""
    if total:
        frac = min(1.0, n / total)
        filled = int(frac * width)
        bar = "#" * filled + " " * (width - filled)
        remaining = (total - n) / rate if rate > 0 else 0.0
        return (f"{label}{frac * 100:3.0f}%|{bar}| {n}/{total} "
                f"[{_clock(elapsed)}<{_clock(remaining)}, {rate:.2f} it/s]")
    return f"{label}{n} it [{_clock(elapsed)}, {rate:.2f} it/s]"


class progress:
    """Wrap an iterable and show its progress on stderr while it is consumed.

    Arguments: ``total`` (defaults to ``len(iterable)`` when it has one), ``desc`` (a label),
    ``file`` (default ``sys.stderr``), ``enable`` (None: only on a terminal and when ``CI`` is
    unset; True/False force it), ``min_interval`` (seconds between redraws).

    Example:
        >>> from funcgrad.data import progress
        >>> list(progress([1, 2, 3], enable=False))
        [1, 2, 3]
    """

    def __init__(self, iterable, total=None, desc=None, file=None, enable=None,
                 min_interval=0.1):
        self.iterable = iterable
        if total is None:
            try:
                total = len(iterable)
            except TypeError:
                total = None
        self.total = total
        self.desc = desc
        self.file = file if file is not None else sys.stderr
        self.enabled = _should_draw(self.file, enable)
        self.min_interval = min_interval
        self.n = 0

    def __len__(self):
        if self.total is None:
            raise TypeError("progress.__len__: the wrapped iterable has no length and no total "
                            "was given")
        return self.total

    def _draw(self, elapsed, final=False):
        line = format_bar(self.n, self.total, elapsed, self.desc)
        try:
            self.file.write("\r" + line + ("\n" if final else ""))
            self.file.flush()
        except (ValueError, OSError):
            self.enabled = False

    def __iter__(self):
        if not self.enabled:
            for item in self.iterable:
                self.n += 1
                yield item
            return
        start = last = time.monotonic()
        self._draw(0.0)
        try:
            for item in self.iterable:
                self.n += 1
                now = time.monotonic()
                if now - last >= self.min_interval:
                    last = now
                    self._draw(now - start)
                yield item
        finally:
            self._draw(time.monotonic() - start, final=True)
