"""Checkpoint and resume for the examples: model and optimizer state in two safetensors files.

Example:
    >>> start = resume(model, opt, "lenet_checkpoint")       # 0 when there is no checkpoint
    >>> save(model, opt, "lenet_checkpoint", progress=epoch + 1)
"""
import os

import funcgrad


def _paths(prefix):
    return prefix + ".model.safetensors", prefix + ".optim.safetensors"


def resume(model, opt, prefix, sched=None):
    """Load the state saved by ``save`` into ``model`` and ``opt`` (and advance ``sched``);
    returns the saved progress counter (epochs or steps done), or 0 without a checkpoint."""
    model_path, opt_path = _paths(prefix)
    if not os.path.exists(model_path):
        return 0
    model.load_state_dict(funcgrad.load(model_path))
    saved = funcgrad.load(opt_path)
    opt.load_state_dict(saved["optimizer"])
    progress = int(saved["progress"])
    if sched is not None:
        sched.step(progress)
    print(f"resumed from {model_path} at {progress}")
    return progress


def save(model, opt, prefix, progress):
    """Write model and optimizer state (each file atomically) with the progress counter."""
    model_path, opt_path = _paths(prefix)
    funcgrad.save(model.state_dict(), model_path)
    funcgrad.save({"optimizer": opt.state_dict(), "progress": progress}, opt_path)
