"""Start-up with the persistent compilation cache: the LeNet and ResNet-18 examples run in a
fresh process without the cache, with an empty cache (cold: compiles and writes) and with the
filled cache (warm: loads the executables), with ``FUNCGRAD_LOG_COMPILES=1`` counting
compilations and loads from the log.

Run: ``.venv/bin/python bench/compile_cache.py`` (``--only lenet`` for the short one).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUNS = {
    "lenet": ["examples/lenet_mnist.py", "--epochs", "1", "--n-train", "256", "--n-test", "256",
              "--data-dir", "/nonexistent", "--checkpoint", "{tmp}/lenet_ckpt"],
    "resnet18": ["examples/train_vision.py", "--model", "resnet18", "--steps", "2",
                 "--batch-size", "8", "--data-dir", "/nonexistent",
                 "--checkpoint", "{tmp}/resnet_ckpt"],
}

_LINE = re.compile(r"(Compiled|Loaded from the persistent compilation cache) .* in "
                   r"([0-9.]+) ms")


def run(model, cache_dir, tmp):
    env = dict(os.environ, PYTHONPATH=ROOT, FUNCGRAD_LOG_COMPILES="1",
               TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("FUNCGRAD_COMPILATION_CACHE_DIR", None)
    if cache_dir:
        env["FUNCGRAD_COMPILATION_CACHE_DIR"] = cache_dir
    script, *rest = RUNS[model]
    cmd = [sys.executable, os.path.join(ROOT, script)] + [a.format(tmp=tmp) for a in rest]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    compiled = [float(m.group(2)) for m in _LINE.finditer(out.stderr)
                if m.group(1) == "Compiled"]
    loaded = [float(m.group(2)) for m in _LINE.finditer(out.stderr) if m.group(1) != "Compiled"]
    return wall, len(compiled), sum(compiled) / 1e3, len(loaded), sum(loaded) / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", choices=sorted(RUNS))
    args = ap.parse_args()
    print(f"{'model':9} {'run':9} {'wall s':>7} {'compiled':>9} {'compile s':>10} "
          f"{'loaded':>7} {'load s':>7}")
    for model in ([args.only] if args.only else sorted(RUNS)):
        with tempfile.TemporaryDirectory() as tmp:
            cache = os.path.join(tmp, "cache")
            for label, cache_dir in (("no cache", None), ("cold", cache), ("warm", cache)):
                wall, n_c, t_c, n_l, t_l = run(model, cache_dir, tmp)
                print(f"{model:9} {label:9} {wall:7.1f} {n_c:9d} {t_c:10.2f} {n_l:7d} "
                      f"{t_l:7.2f}", flush=True)


if __name__ == "__main__":
    main()
