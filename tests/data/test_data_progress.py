"""The progress bar: drawn on a terminal, quiet otherwise and under CI."""
import io

import numpy as np

from funcgrad.data import DataLoader, TensorDataset, progress
from funcgrad.data.progress import format_bar


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_format_bar():
    assert format_bar(5, 10, 2.0, desc="epoch 1") == \
        "epoch 1:  50%|############            | 5/10 [00:02<00:02, 2.50 it/s]"
    assert format_bar(3, None, 1.5) == "3 it [00:01, 2.00 it/s]"
    assert format_bar(10, 10, 3725.0).endswith("10/10 [1:02:05<00:00, 0.00 it/s]")


def test_draws_on_a_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    out = _Tty()
    items = list(progress(range(4), desc="load", file=out, min_interval=0.0))
    assert items == [0, 1, 2, 3]
    text = out.getvalue()
    assert text.startswith("\rload:   0%|") and text.endswith("\n")
    assert "4/4" in text.splitlines()[-1] and "100%" in text


def test_quiet_when_not_a_tty_or_under_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pipe = io.StringIO()
    assert list(progress(range(3), file=pipe)) == [0, 1, 2]
    assert pipe.getvalue() == ""
    monkeypatch.setenv("CI", "true")
    tty = _Tty()
    assert list(progress(range(3), file=tty)) == [0, 1, 2]
    assert tty.getvalue() == ""
    forced = _Tty()
    list(progress(range(2), file=forced, enable=True, min_interval=0.0))
    assert "2/2" in forced.getvalue()


def test_dataloader_progress_flag_is_quiet_without_a_terminal(capsys):
    loader = DataLoader(TensorDataset(np.arange(6)), batch_size=2, progress="epoch")
    assert [b[0].tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    assert capsys.readouterr().err == ""
    assert len(progress([1, 2, 3])) == 3
